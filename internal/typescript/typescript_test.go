package typescript

import (
	"context"
	"strings"
	"testing"
)

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		code        string
		line, col   int
		unsupported bool
	}{
		{"const items = [1, 2]\nfor (const x of items) {\n  if (x > 1 {\n    return x\n  }\n}", 3, 13, false},
		{"return [1].map((x) => await x)", 1, 23, false},
		{"let a = 1\nlet a = 2\nreturn a", 2, 5, false},
		{"import fs from \"fs\"\nreturn 1", 1, 1, true},
		{"const x = 1\nexport default x", 2, 1, true},
		{"return (1 +", 1, 12, false},
	} {
		_, err := Compile(context.Background(), tc.code)
		e, ok := err.(*Error)
		if !ok {
			t.Errorf("%q: got %v, want *Error", tc.code, err)
			continue
		}
		if e.Line != tc.line || e.Column != tc.col || e.Unsupported != tc.unsupported {
			t.Errorf("%q: got %d:%d unsupported=%v (%s), want %d:%d unsupported=%v", tc.code, e.Line, e.Column, e.Unsupported, e.Message, tc.line, tc.col, tc.unsupported)
		}
	}
}

func TestCompileStripsTypes(t *testing.T) {
	p, err := Compile(context.Background(), "interface A { x: number }\nconst a: A = { x: 1 }\nreturn a.x as number")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p.Script, "interface") || !strings.Contains(p.Script, "async") {
		t.Errorf("script not stripped: %s", p.Script)
	}
	// "return a.x" is program line 3; find it in the script and map back.
	for i, l := range strings.Split(p.Script, "\n") {
		if c := strings.Index(l, "return"); c >= 0 {
			line, col, ok := p.Position(i+1, c+1)
			if !ok || line != 3 || col != 1 {
				t.Errorf("Position(%d,%d) = %d,%d,%v; want 3,1", i+1, c+1, line, col, ok)
			}
		}
	}
}

func TestWrapFastPath(t *testing.T) {
	for code, fast := range map[string]bool{
		"return 1": true,
		"const a = [1, 2]\nreturn a.map((x) => x)": true,
		"if (a < b && c > (d)) return 1":           true, // not a call shape: "&&" breaks it
		"return items.map<string>((i) => i.id)":    false,
		"const m = new Map<string, number>()":      false,
		"return f<{ a: Array<number> }>(x)":        false,
		"   \n\t":                                  false,
		"let x: number = 1":                        true, // a syntax error to JavaScript: falls back later
	} {
		if got := Wrap(code) != nil; got != fast {
			t.Errorf("Wrap(%q) fast = %v, want %v", code, got, fast)
		}
	}
	p := Wrap("const a = 1\nthrow new Error(a)")
	if l, c, ok := p.Position(3, 7); !ok || l != 2 || c != 7 {
		t.Errorf("Position(3,7) = %d,%d,%v", l, c, ok)
	}
}
