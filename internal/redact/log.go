package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler returns a slog.Handler that redacts the message and the
// attributes of every record (those added by WithAttrs too) before
// passing it to h. Strings are redacted; errors, Stringers and other
// values are redacted through their text and, when that held a secret,
// logged as that redacted text. Numbers, booleans, times and durations
// pass as they are. With an empty r it returns h.
func Handler(h slog.Handler, r *Redactor) slog.Handler {
	if r.Empty() {
		return h
	}
	return &handler{h: h, get: func() *Redactor { return r }}
}

// LiveHandler is Handler with a Redactor that may change: get is called
// for every record, so secrets learnt later (a refreshed token) are
// redacted from then on.
func LiveHandler(h slog.Handler, get func() *Redactor) slog.Handler {
	return &handler{h: h, get: get}
}

type handler struct {
	h   slog.Handler
	get func() *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	r := h.get()
	out := slog.NewRecord(rec.Time, rec.Level, r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	r := h.get()
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = r.attr(a)
	}
	return &handler{h: h.h.WithAttrs(red), get: h.get}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), get: h.get}
}

// attr redacts one attribute's value.
func (r *Redactor) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, e := range g {
			red[i] = r.attr(e)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case error:
			text = x.Error()
		default:
			text = fmt.Sprint(x)
		}
		if red := r.String(text); red != text {
			return slog.String(a.Key, red)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
