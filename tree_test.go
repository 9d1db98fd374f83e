package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/codemode-go/codemode/internal/spoof"
)

func noop() Tool {
	return Tool{Run: func(context.Context, json.RawMessage) (any, error) { return nil, nil }}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"lookup": true, "odd-name": true, "with space": true, "constructor": true, "__proto__": true,
		"名前": true, "café": true, "ship 🚀": true, "weird/name.x": true,
		"then": false, "toJSON": false, "": false, "a\x00b": false,
		// What does not show as itself: invisible, bidirectional,
		// control and separator characters, and compatibility forms.
		"ref\u200bund": false, "refund\u202e": false, "\u2066refund\u2069": false, "refund\u200e": false,
		"refund\u200f": false, "refund\u061c": false, "\ufeffrefund": false, "ref\u00adund": false,
		"refund\U000E0041": false, "refund\n": false, "refund\t": false, "refund\u2028": false,
		"refund\u2029": false, "re\u00a0fund": false, "ｒｅｆｕｎｄ": false, "\ufb01le": false,
		"cafe\u0301": false, "refund\ufe0f": false, "ref\u3164und": false, "ref\ue000und": false,
		"ref\xffund": false,
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
	for name, want := range map[string]string{
		"then": "then_", "": "_", "a\x00b": "a{U+0000}b", "ref\u200bund": "ref{U+200B}und",
		"ｒｅｆ": "{U+FF52}{U+FF45}{U+FF46}", "cafe\u0301": "caf{U+0065}{U+0301}", "x\xff": "x{U+FFFD}",
		"\u2066then\u2069": "{U+2066}then{U+2069}",
	} {
		if got := SafeName(name); got != want {
			t.Errorf("SafeName(%q) = %q, want %q", name, got, want)
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

// TestNewRefusesHiddenCharacters: a tool or namespace name with a
// character that does not show as itself is refused when the Runtime is
// made, with an error that spells the path out, so the person reading it
// sees what is wrong; SafeName spells such characters out too, so the
// name it makes cannot pass for the one imitated.
func TestNewRefusesHiddenCharacters(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree Tools
		path string // as the error spells it
	}{
		{"zero-width space", Tools{"orders": Tools{"ref\u200bund": noop(), "refund": noop()}}, `tools.orders["ref\u200bund"]`},
		{"right-to-left override", Tools{"orders": Tools{"refund\u202e": noop()}}, `tools.orders["refund\u202e"]`},
		{"isolates around a namespace", Tools{"\u2066orders\u2069": Tools{"refund": noop()}}, `tools["\u2066orders\u2069"]`},
		{"marks", Tools{"orders": Tools{"\u200erefund\u200f\u061c": noop()}}, `tools.orders["\u200erefund\u200f\u061c"]`},
		{"byte-order mark", Tools{"orders": Tools{"\ufeffrefund": noop()}}, `tools.orders["\ufeffrefund"]`},
		{"control", Tools{"orders": Tools{"refund\r": noop()}}, `tools.orders["refund\r"]`},
		{"line separator, deep", Tools{"a": Tools{"b": Tools{"c\u2028": noop()}}}, `tools.a.b["c\u2028"]`},
		{"fullwidth", Tools{"orders": Tools{"ｒｅｆｕｎｄ": noop(), "refund": noop()}}, `tools.orders["\uff52\uff45\uff46\uff55\uff4e\uff44"]`},
		{"decomposed accent", Tools{"orders": Tools{"cafe\u0301": noop()}}, `tools.orders["caf\u0065\u0301"]`},
		{"not UTF-8", Tools{"orders": Tools{"ref\xffund": noop()}}, `tools.orders["ref\ufffdund"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{Tools: tc.tree})
			if !errors.Is(err, ErrInvalidOptions) || !errors.Is(err, ErrInvalidName) {
				t.Fatalf("got %v, want ErrInvalidOptions and ErrInvalidName", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.path) {
				t.Errorf("got %q, want it to name %s", msg, tc.path)
			}
			if i, j := spoof.Find(msg); i >= 0 {
				t.Errorf("got %q, which holds %q raw", msg, msg[i:j])
			}
		})
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

// TestUnknownHiddenNameSpelledOut: a program that calls a name with a
// character that does not show as itself gets an error that spells the
// name out, so neither the model nor a person reading the log mistakes it
// for the tool it imitates.
func TestUnknownHiddenNameSpelledOut(t *testing.T) {
	rt := mustNew(t, Options{Tools: Tools{"orders": Tools{"refund": noop()}}})
	for name, want := range map[string]string{
		`"ref\u200bund"`:       `tools.orders["ref\u200bund"]`,
		`"ｒｅｆｕｎｄ"`:             `tools.orders["\uff52\uff45\uff46\uff55\uff4e\uff44"]`,
		`"refund\u202e"`:       `tools.orders["refund\u202e"]`,
		`"\u2066refund\u2069"`: `tools.orders["\u2066refund\u2069"]`,
	} {
		t.Run(want, func(t *testing.T) {
			res, err := rt.Execute(context.Background(), `try { await tools.orders[`+name+`]({}) } catch (e) { return e.message }`)
			if err != nil || !res.OK {
				t.Fatalf("run: %v %s", err, resultJSON(res))
			}
			var msg string
			if err := json.Unmarshal(res.Value, &msg); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(msg, want) {
				t.Errorf("got %q, want it to name %s", msg, want)
			}
			if i, j := spoof.Find(msg); i >= 0 {
				t.Errorf("got %q, which holds %q raw", msg, msg[i:j])
			}
		})
	}
}
