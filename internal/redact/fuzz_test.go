package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzRedact: no input makes a Redactor panic; the raw secret never
// survives String or JSON; and JSON keeps valid JSON valid when it says so.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{`{"a":"sk\/live"}`, `sk%2Flive`, `&#x73;k/live`, `\uD83D\uDE00`, `c2svbGl2ZQ==`, `"\"`, `%`, `&#`} {
		f.Add(s, "sk/live")
	}
	f.Fuzz(func(t *testing.T, text, secret string) {
		r := New(secret)
		got := r.String(text)
		if len(secret) >= minSecret && strings.TrimSpace(secret) != "" && strings.Contains(got, secret) && !strings.Contains(Mark, secret) {
			t.Fatalf("String(%q) = %q still holds %q", text, got, secret)
		}
		if json.Valid([]byte(text)) {
			out, valid := r.JSON([]byte(text))
			if valid && !json.Valid(out) {
				t.Fatalf("JSON(%q) = %q, invalid but reported valid", text, out)
			}
		}
		_ = r.Value([]any{text, map[string]any{text: json.RawMessage("1")}})
	})
}
