package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func noop() Tool {
	return Tool{Run: func(context.Context, json.RawMessage) (any, error) { return nil, nil }}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"lookup": true, "odd-name": true, "with space": true, "constructor": true, "__proto__": true,
		"名前": true, "then": false, "toJSON": false, "": false, "a\x00b": false,
	} {
		err := CheckName(name)
		if (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok %v", name, err, ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("CheckName(%q) = %v, want it to wrap ErrInvalidName", name, err)
		}
		if got := SafeName(name); CheckName(got) != nil || (ok && got != name) {
			t.Errorf("SafeName(%q) = %q", name, got)
		}
	}
}

// TestNewRefusesUnusableNames: a name no program can call is refused when
// the Runtime is made, with both named errors.
func TestNewRefusesUnusableNames(t *testing.T) {
	_, err := New(Options{Tools: Tools{"ns": Tools{"then": noop()}}})
	if !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, ErrInvalidName) {
		t.Fatalf("got %v, want ErrInvalidOptions and ErrInvalidName", err)
	}
	if msg := err.Error(); strings.Count(msg, "codemode:") != 1 || !strings.Contains(msg, "tools.ns.then") {
		t.Errorf("message %q: want one codemode: prefix and the path", msg)
	}
}

func TestWalk(t *testing.T) {
	tree := Tools{
		"b":  Tools{"z": noop(), "a": Tools{"deep": noop()}},
		"a":  Tools{"x": noop()},
		"$c": Tools{"p": func() *Tool { t := noop(); return &t }()},
	}
	var got []string
	if err := tree.Walk(func(path []string, _ Tool) error {
		got = append(got, strings.Join(path, "/"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"$c/p", "a/x", "b/a/deep", "b/z"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	stop := errors.New("stop")
	n := 0
	if err := tree.Walk(func([]string, Tool) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("got %v after %d calls, want the callback's error after 1", err, n)
	}
	for name, bad := range map[string]Tools{
		"nil node":      {"ns": Tools{"x": nil}},
		"nil *Tool":     {"ns": Tools{"x": (*Tool)(nil)}},
		"reserved name": {"ns": Tools{"toJSON": noop()}},
	} {
		if err := bad.Walk(func([]string, Tool) error { return nil }); err == nil {
			t.Errorf("%s: Walk accepted it", name)
		}
	}
}

func TestMerge(t *testing.T) {
	a := Tools{"orders": Tools{"lookup": noop()}}
	b := Tools{"github": Tools{"issues": Tools{"list": noop()}}}
	m, err := Merge(a, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m["orders"] == nil || m["github"] == nil || len(a) != 1 {
		t.Errorf("got %v", m)
	}
	_, err = Merge(a, Tools{"orders": Tools{"refund": noop()}})
	if !errors.Is(err, ErrNameClash) || !strings.Contains(err.Error(), `"orders"`) {
		t.Errorf("got %v, want a clash naming orders", err)
	}
	// A merged tree runs.
	rt := mustNew(t, Options{Tools: m})
	if res := run(t, rt, `return Object.keys(tools)`); string(res.Value) != `["github","orders","$codemode"]` {
		t.Errorf("got %s", resultJSON(res))
	}
}
