package otlp

import (
	"context"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Span flags of OTLP: the low 8 bits are the W3C trace flags; these say
// whether the parent (or a link's span) is remote, and that this is known.
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// TraceExporter sends spans to an OTLP/HTTP endpoint. It is an
// sdktrace.SpanExporter; give it to sdktrace.WithBatcher.
type TraceExporter struct{ c *client }

// NewTraceExporter returns an exporter posting to cfg.URL.
func NewTraceExporter(cfg Config) *TraceExporter {
	return &TraceExporter{c: newClient(cfg, "spans")}
}

// ExportSpans sends spans as one ExportTraceServiceRequest.
func (x *TraceExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	return x.c.post(ctx, encodeSpans(spans))
}

// Shutdown makes later exports fail; an export under way ends by its
// own context.
func (x *TraceExporter) Shutdown(context.Context) error {
	x.c.shutdown()
	return nil
}

// encodeSpans writes an ExportTraceServiceRequest: spans grouped by
// resource, then by instrumentation scope, each group in the order its
// first span came.
func encodeSpans(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	type group struct {
		res    *resource.Resource
		scopes []scopeKey
	}
	var order []attribute.Distinct
	groups := map[attribute.Distinct]*group{}
	members := map[scopeKey][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		rk := s.Resource().Equivalent()
		g := groups[rk]
		if g == nil {
			g = &group{res: s.Resource()}
			groups[rk] = g
			order = append(order, rk)
		}
		sk := scopeKey{rk, s.InstrumentationScope()}
		if _, seen := members[sk]; !seen {
			g.scopes = append(g.scopes, sk)
		}
		members[sk] = append(members[sk], s)
	}
	var e enc
	for _, rk := range order {
		g := groups[rk]
		e.msg(1, func() { // resource_spans
			if g.res != nil {
				e.msg(1, func() { e.resource(g.res) })
			}
			for _, sk := range g.scopes {
				e.msg(2, func() { // scope_spans
					if sk.scope != (instrumentation.Scope{}) {
						e.msg(1, func() { e.scope(sk.scope) })
					}
					for _, s := range members[sk] {
						e.msg(2, func() { e.span(s) })
					}
					e.str(3, sk.scope.SchemaURL)
				})
			}
			if g.res != nil {
				e.str(3, g.res.SchemaURL())
			}
		})
	}
	return e.b
}

func (e *enc) resource(r *resource.Resource) {
	for it := r.Iter(); it.Next(); {
		e.keyValue(1, it.Attribute())
	}
}

func (e *enc) scope(s instrumentation.Scope) {
	e.str(1, s.Name)
	e.str(2, s.Version)
	for it := s.Attributes.Iter(); it.Next(); {
		e.keyValue(3, it.Attribute())
	}
}

func (e *enc) span(s sdktrace.ReadOnlySpan) {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	e.bytes(1, tid[:])
	e.bytes(2, sid[:])
	e.str(3, sc.TraceState().String())
	if p := s.Parent().SpanID(); p.IsValid() {
		e.bytes(4, p[:])
	}
	e.str(5, s.Name())
	e.uint(6, uint64(spanKind(s.SpanKind())))
	e.fixed64(7, unixNano(s.StartTime()))
	e.fixed64(8, unixNano(s.EndTime()))
	for _, kv := range s.Attributes() {
		e.keyValue(9, kv)
	}
	e.uint(10, count(s.DroppedAttributes()))
	for _, ev := range s.Events() {
		e.msg(11, func() {
			e.fixed64(1, unixNano(ev.Time))
			e.str(2, ev.Name)
			for _, kv := range ev.Attributes {
				e.keyValue(3, kv)
			}
			e.uint(4, count(ev.DroppedAttributeCount))
		})
	}
	e.uint(12, count(s.DroppedEvents()))
	for _, l := range s.Links() {
		e.msg(13, func() {
			tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			e.bytes(1, tid[:])
			e.bytes(2, sid[:])
			e.str(3, l.SpanContext.TraceState().String())
			for _, kv := range l.Attributes {
				e.keyValue(4, kv)
			}
			e.uint(5, count(l.DroppedAttributeCount))
			e.fixed32(6, spanFlags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	e.uint(14, count(s.DroppedLinks()))
	st := s.Status()
	e.msg(15, func() {
		e.str(2, st.Description)
		switch st.Code {
		case codes.Ok:
			e.uint(3, 1)
		case codes.Error:
			e.uint(3, 2)
		}
	})
	e.fixed32(16, spanFlags(sc.TraceFlags(), s.Parent()))
}

// spanKind maps the API's kinds to OTLP's; they agree on 0 to 5.
func spanKind(k trace.SpanKind) int {
	if k < trace.SpanKindUnspecified || k > trace.SpanKindConsumer {
		return 0
	}
	return int(k)
}

func spanFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if parent.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// keyValue writes an attribute as a KeyValue message in field.
func (e *enc) keyValue(field int, kv attribute.KeyValue) {
	e.msg(field, func() {
		e.str(1, string(kv.Key))
		e.msg(2, func() { e.anyValue(kv.Value) })
	})
}

// anyValue writes the body of an AnyValue.
func (e *enc) anyValue(v attribute.Value) {
	array := func(n int, each func(i int)) {
		e.msg(5, func() {
			for i := range n {
				e.msg(1, func() { each(i) })
			}
		})
	}
	switch v.Type() {
	case attribute.BOOL:
		e.tag(2, wireVarint)
		e.varint(b2u(v.AsBool()))
	case attribute.INT64:
		e.tag(3, wireVarint)
		e.varint(uint64(v.AsInt64()))
	case attribute.FLOAT64:
		e.optDouble(4, v.AsFloat64())
	case attribute.STRING:
		e.strAlways(1, v.AsString())
	case attribute.BYTESLICE:
		b := v.AsByteSlice()
		e.tag(7, wireBytes)
		e.varint(uint64(len(b)))
		e.b = append(e.b, b...)
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		array(len(s), func(i int) { e.tag(2, wireVarint); e.varint(b2u(s[i])) })
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		array(len(s), func(i int) { e.tag(3, wireVarint); e.varint(uint64(s[i])) })
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		array(len(s), func(i int) { e.optDouble(4, s[i]) })
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		array(len(s), func(i int) { e.strAlways(1, s[i]) })
	case attribute.SLICE:
		s := v.AsSlice()
		array(len(s), func(i int) { e.anyValue(s[i]) })
	case attribute.MAP:
		m := v.AsMap()
		e.msg(6, func() {
			for _, kv := range m {
				e.keyValue(1, kv)
			}
		})
	case attribute.EMPTY:
	default:
		e.str(1, "INVALID")
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// unixNano is t in OTLP's unsigned nanoseconds; times before 1970 are 0.
func unixNano(t time.Time) uint64 { return uint64(max(0, t.UnixNano())) }

// count clamps a dropped count to uint32.
func count(n int) uint64 { return uint64(min(max(n, 0), math.MaxUint32)) }
