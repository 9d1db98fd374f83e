package typescript

import (
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
		_, err := Compile(tc.code)
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
	p, err := Compile("interface A { x: number }\nconst a: A = { x: 1 }\nreturn a.x as number")
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
