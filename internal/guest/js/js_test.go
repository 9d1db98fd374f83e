package js

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/codemode-go/codemode/internal/guest"
	"github.com/codemode-go/codemode/internal/tsgen"
	"github.com/codemode-go/codemode/internal/typescript"
)

func TestCheck(t *testing.T) {
	// An accepted program is a nil error, not a nil *typescript.Error
	// wrapped in one.
	if err := (Language{}).Check("return 1"); err != nil {
		t.Fatalf("Check(return 1) = %#v, want nil", err)
	}
	err := Language{}.Check("return " + strings.Repeat("(", typescript.MaxNesting+1) + "1" + strings.Repeat(")", typescript.MaxNesting+1))
	var ge *guest.Error
	if !errors.As(err, &ge) || ge.Unsupported || ge.Line != 1 || ge.Column == 0 {
		t.Fatalf("Check(deep) = %#v, want a located parse error", err)
	}
}

func TestWrap(t *testing.T) {
	p := Language{}.Wrap("const x = 1\nreturn x")
	if p == nil || p.Transformed || !strings.Contains(p.Script, "return x") {
		t.Fatalf("Wrap = %+v, want the program as written", p)
	}
	// Script line 3 is program line 2: the wrapper's header is a line.
	if l, c, ok := p.Position(3, 4); !ok || l != 2 || c != 4 {
		t.Errorf("Position(3, 4) = %d:%d %v, want 2:4", l, c, ok)
	}
	for _, code := range []string{"", "  \n", "return f<string>(x)"} {
		if p := (Language{}).Wrap(code); p != nil {
			t.Errorf("Wrap(%q) = %+v, want nil (transform first)", code, p)
		}
	}
}

func TestTransform(t *testing.T) {
	ctx := context.Background()
	big := "return 1 +\n" + strings.Repeat("1 + ", typescript.MaxTranspileBytes/4) + "@"
	for _, tc := range []struct {
		name      string
		code      string
		asWritten bool
		// One of these is expected.
		line, column int // where String(n) is in the program as written
		err          *guest.Error
		declined     bool
	}{
		{name: "types stripped", code: "const n: number = 1\nconst s: string = String(n)\nreturn s", line: 2, column: 19},
		{name: "import", code: "import fs from 'fs'\nreturn 1", asWritten: true,
			err: &guest.Error{Unsupported: true, Line: 1, Column: 1, Suggestions: []string{"Remove the import/export statement: the only capabilities are the functions on the global `tools` object."}}},
		{name: "empty", code: " \n",
			err: &guest.Error{Suggestions: []string{"Write the body of an async function and `return` the value you need."}}},
		{name: "syntax error", code: "return (1", asWritten: true, err: &guest.Error{Line: 1}},
		{name: "too large, tried as written", code: big, asWritten: true, declined: true},
		{name: "too large, not tried", code: big, err: &guest.Error{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Language{}.Transform(ctx, tc.code, tc.asWritten)
			var ge *guest.Error
			var dec *guest.Declined
			switch {
			case tc.declined:
				if !errors.As(err, &dec) || !strings.Contains(dec.Suggestion, "plain JavaScript") {
					t.Fatalf("got %v, %v; want Declined", p, err)
				}
			case tc.err != nil:
				if !errors.As(err, &ge) || ge.Message == "" {
					t.Fatalf("got %v, %#v; want a *guest.Error", p, err)
				}
				if ge.Unsupported != tc.err.Unsupported || (tc.err.Line > 0 && ge.Line != tc.err.Line) ||
					(tc.err.Column > 0 && ge.Column != tc.err.Column) || !reflect.DeepEqual(ge.Suggestions, tc.err.Suggestions) {
					t.Errorf("got %+v, want %+v", ge, tc.err)
				}
			default:
				if err != nil || p == nil || !p.Transformed {
					t.Fatalf("got %+v, %v; want a transformed program", p, err)
				}
				if strings.Contains(p.Script, ": number") {
					t.Errorf("types left in %q", p.Script)
				}
				// String(n) on line 2, as the engine would report it in
				// the transformed script.
				var sl, sc int
				for i, line := range strings.Split(p.Script, "\n") {
					if j := strings.Index(line, "String(n)"); j >= 0 {
						sl, sc = i+1, j+1
					}
				}
				if l, c, ok := p.Position(sl, sc); !ok || l != tc.line || c != tc.column {
					t.Errorf("Position(%d, %d) = %d:%d %v, want %d:%d", sl, sc, l, c, ok, tc.line, tc.column)
				}
			}
		})
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := (Language{}).Transform(cancelled, "const n: number = 1", false); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want context.Canceled", err)
	}
}

func TestSignatureAndCallSite(t *testing.T) {
	in := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)
	tool := guest.Tool{Path: []string{"orders", "odd-name"}, Description: "Looks up an order.", Tags: []string{"@readonly"}, Input: in}
	if got, want := (Language{}).Signature(tool).Text, tsgen.Signature(tool.Path, tool.Description, tool.Tags, in, nil, true); got != want {
		t.Errorf("Signature:\n%s\nwant\n%s", got, want)
	}
	for path, want := range map[string]string{"orders/lookup": "tools.orders.lookup", "ns/odd-name": `tools.ns["odd-name"]`} {
		if got := (Language{}).CallSite(strings.Split(path, "/")); got != want {
			t.Errorf("CallSite(%s) = %s, want %s", path, got, want)
		}
	}
}

func TestGuide(t *testing.T) {
	g := Language{}.Guide()
	v := reflect.ValueOf(g)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("Guide.%s is empty", v.Type().Field(i).Name)
		}
	}
	g.Language[0] = "changed"
	if Language.Guide(Language{}).Language[0] == "changed" {
		t.Error("a caller's change to the guide reached the next caller")
	}
}
