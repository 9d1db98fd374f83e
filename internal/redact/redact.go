package redact

import (
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
)

// Mark replaces every secret found.
const Mark = "[REDACTED]"

const (
	// minSecret is the shortest secret looked for raw: shorter ones would
	// match ordinary text.
	minSecret = 4
	// minEncoded is the shortest encoded form looked for: a base64 or hex
	// fragment shorter than this turns up by chance in other base64.
	minEncoded = 8
)

// Redactor replaces a fixed set of secrets, in the forms the package
// documentation lists. Its methods are safe for concurrent use; a nil
// *Redactor has no secrets and changes nothing.
type Redactor struct {
	forms  []string // the raw secrets and their hex and base64 forms, longest first
	spaces bool     // some form holds a space, so "+" as a space matters
	maxLen int      // the longest form

	// heads has the bit of every form's first two bytes set, and byHead
	// lists the forms by them: one pass over a text with a bit test per
	// byte finds the few places worth comparing, where a search per form
	// would read the text dozens of times.
	heads  [1 << 16 / 64]uint64
	byHead map[uint16][]int
}

// New returns a Redactor for secrets. Empty, blank and duplicate secrets
// are ignored.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	add := func(f string, min int) {
		if len(f) >= min && !slices.Contains(r.forms, f) {
			r.forms = append(r.forms, f)
		}
	}
	for _, s := range secrets {
		if strings.TrimSpace(s) == "" {
			continue
		}
		add(s, minSecret)
		b := []byte(s)
		add(hex.EncodeToString(b), minEncoded)
		add(strings.ToUpper(hex.EncodeToString(b)), minEncoded)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			full := enc.EncodeToString(b)
			add(full, minEncoded)
			add(strings.TrimRight(full, "="), minEncoded)
			for offset := range 3 {
				add(core(enc, b, offset), minEncoded)
			}
		}
	}
	slices.SortStableFunc(r.forms, func(a, b string) int { return len(b) - len(a) })
	r.byHead = map[uint16][]int{}
	for i, f := range r.forms {
		r.spaces = r.spaces || strings.Contains(f, " ")
		r.maxLen = max(r.maxLen, len(f))
		h := head(f, 0)
		r.heads[h/64] |= 1 << (h % 64)
		r.byHead[h] = append(r.byHead[h], i)
	}
	return r
}

// core is the part of the base64 of b that b alone decides when b starts
// offset bytes after a 3-byte boundary of a longer input: base64 turns 3
// bytes into 4 characters, so the characters at either end also carry
// bits of the neighbouring bytes and differ from one input to another.
func core(enc *base64.Encoding, b []byte, offset int) string {
	buf := make([]byte, offset+len(b)+2)
	copy(buf[offset:], b)
	e := enc.WithPadding(base64.NoPadding).EncodeToString(buf)
	// Character k holds bits [6k, 6k+6); b's bits are [8*offset, 8*(offset+len(b))).
	return e[(8*offset+5)/6 : 8*(offset+len(b))/6]
}

// Empty reports whether r has nothing to look for.
func (r *Redactor) Empty() bool { return r == nil || len(r.forms) == 0 }

// Window is the longest text one occurrence of a secret can take after
// one layer of escaping. A caller that must cut a stream into pieces
// keeps that much of each piece for the next, so that no secret is
// halved by a cut (a secret under several layers can be longer still).
func (r *Redactor) Window() int {
	if r == nil {
		return 0
	}
	return r.maxLen * maxUnit
}

// String returns s with every secret replaced by Mark.
func (r *Redactor) String(s string) string {
	if r.Empty() {
		return s
	}
	return apply(s, r.spans(s))
}

// span is a range of the original text that holds a secret.
type span struct{ start, end int }

// spans finds every secret in s, in every view of it, as merged ranges of
// s in order.
func (r *Redactor) spans(s string) []span {
	var out []span
	r.find(&view{text: s}, &out)
	for _, plus := range []bool{false, true} {
		if plus && !r.spaces {
			continue // "+" for a space only matters to a secret with a space
		}
		v := &view{text: s}
		for range maxLayers {
			text, marks, ok := decodeLayer(v.text, plus)
			if !ok {
				break
			}
			v = &view{text: text, marks: marks, parent: v}
			r.find(v, &out)
		}
	}
	if len(out) < 2 {
		return out
	}
	slices.SortFunc(out, func(a, b span) int { return a.start - b.start })
	merged := out[:1]
	for _, sp := range out[1:] {
		last := &merged[len(merged)-1]
		if sp.start <= last.end {
			last.end = max(last.end, sp.end)
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// head is the two bytes at s[i:] (every form has at least four).
func head(s string, i int) uint16 { return uint16(s[i])<<8 | uint16(s[i+1]) }

// find adds the occurrences of every form in v, overlapping ones
// included (a secret may begin inside another).
func (r *Redactor) find(v *view, out *[]span) {
	text := v.text
	for i := 0; i+minSecret <= len(text); i++ {
		h := head(text, i)
		if r.heads[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		for _, fi := range r.byHead[h] {
			if f := r.forms[fi]; strings.HasPrefix(text[i:], f) {
				start, end := v.source(i, i+len(f))
				*out = append(*out, span{start, end})
				break // the forms are longest first: the others end inside this one
			}
		}
	}
}

// apply replaces the spans of s with Mark.
func apply(s string, spans []span) string {
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(Mark)
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// Error returns err when its message holds no secret, and otherwise an
// error whose message is redacted. The original stays reachable through
// errors.Is and errors.As (a context error is still one), so only code
// that unwraps it on purpose sees the secret again.
func (r *Redactor) Error(err error) error {
	if err == nil || r.Empty() {
		return err
	}
	msg := err.Error()
	if red := r.String(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
