package guest_test

import (
	"testing"

	"github.com/codemode-go/codemode/internal/guest"
	"github.com/codemode-go/codemode/internal/sandbox"
)

// The JavaScript runner can suspend; the root finds that out by this
// interface, not by its type.
var _ guest.Suspender = (*sandbox.Sandbox)(nil)

func TestProgramPosition(t *testing.T) {
	shift := func(line, column int) (int, int, bool) { return line - 1, column, line > 1 }
	for _, tc := range []struct {
		name         string
		p            *guest.Program
		line, column int
		wantLine     int
		wantColumn   int
		wantOK       bool
	}{
		{"no program", nil, 2, 3, 0, 0, false},
		{"no map", &guest.Program{Script: "x"}, 2, 3, 0, 0, false},
		{"mapped", &guest.Program{Script: "x", Locate: shift}, 2, 3, 1, 3, true},
		{"outside the program", &guest.Program{Script: "x", Locate: shift}, 1, 3, 0, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, c, ok := tc.p.Position(tc.line, tc.column)
			if ok != tc.wantOK || (ok && (l != tc.wantLine || c != tc.wantColumn)) {
				t.Errorf("got %d:%d %v, want %d:%d %v", l, c, ok, tc.wantLine, tc.wantColumn, tc.wantOK)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	if got, want := (&guest.Error{Message: "unexpected token", Line: 3, Column: 7}).Error(), "3:7: unexpected token"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := (&guest.Error{Message: "empty"}).Error(), "empty"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
