package tsgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzType checks that no input makes Type or Signature panic or return
// nothing. The seed corpus is testdata/fuzz/FuzzType plus every golden
// case file.
func FuzzType(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(casesDir, "*.json"))
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data, false)
			f.Add(data, true)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, pretty bool) {
		out := Type(data, pretty)
		if out == "" {
			t.Fatal("empty rendering")
		}
		if !pretty && strings.ContainsAny(out, "\r\n") {
			t.Fatalf("one-line form has a line break: %q", out)
		}
		sig := Signature([]string{"ns", "a-b"}, string(data), []string{"@destructive"}, data, data, pretty)
		if !strings.HasPrefix(sig, "/**") && !strings.HasPrefix(sig, `tools.ns["a-b"](`) {
			t.Fatalf("signature does not start with its path: %q", sig)
		}
		// Bounded renders, with every reference named: the text stays
		// within the bound unless a single object has nothing to cut.
		named := func(ref string) (string, bool) { return TypeName(ref), ref != "" }
		r := Render([]string{"ns", "a-b"}, string(data), nil, data, data, Options{Named: named, MaxSize: 300, Parts: "P"})
		if !strings.Contains(r.Text, `tools.ns["a-b"](`) {
			t.Fatalf("render lacks its path: %q", r.Text)
		}
		d := Declare("T", string(data), data, Options{Named: named, MaxSize: 300})
		if !strings.Contains(d.Text, "type T = ") {
			t.Fatalf("declaration: %q", d.Text)
		}
		for _, p := range append(r.Parts, d.Parts...) {
			if !strings.Contains(p.Name, "_") || !strings.HasPrefix(p.Text, "type "+p.Name+" = ") {
				t.Fatalf("part %q: %q", p.Name, p.Text)
			}
		}
	})
}
