package redact

import (
	"strings"
	"testing"
)

// benchSecrets are what one basic-auth call with a static API key sends.
var benchSecrets = []string{"svc-user", "pass word 123", "svc-user:pass word 123", "key_live_4eC39HqLyjWDarjtT1zdp7dc"}

// BenchmarkRedact measures a 1 MiB body without secrets, the common case,
// as plain text, as text full of escapes (every layer gets decoded and
// searched) and as JSON.
func BenchmarkRedact(b *testing.B) {
	r := New(benchSecrets...)
	plain := strings.Repeat(`{"name": "cafe x y z", "n": 12345, "tags": ["aaaa", "bbbb"]}, `, 1<<20/64)
	escaped := strings.Repeat(`{"name": "caf\u00e9 \/x%20y &amp; z", "n": 12345, "q": "a+b"}, `, 1<<20/64)
	for _, bc := range []struct {
		name string
		f    func()
	}{
		{"plain", func() { r.String(plain) }},
		{"escaped", func() { r.String(escaped) }},
		{"json", func() { r.JSON([]byte("[" + escaped + "1]")) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(1 << 20)
			for b.Loop() {
				bc.f()
			}
		})
	}
}
