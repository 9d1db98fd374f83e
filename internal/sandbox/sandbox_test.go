package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var testSandbox *Sandbox

func sb(t testing.TB) *Sandbox {
	t.Helper()
	if testSandbox == nil {
		s, err := New(context.Background(), testOptions(Options{}))
		if err != nil {
			t.Fatal(err)
		}
		testSandbox = s
	}
	return testSandbox
}

// echoNS is a namespace whose every member echoes its input, except
// "fail", which rejects with a CallError.
func echoNS(name string, members ...[]string) Namespace {
	return Namespace{
		Name:       name,
		Members:    members,
		ErrorClass: &ErrorClass{Name: "CallFailed", Member: "member"},
		Admit: func(c Call) (Work, error) {
			if c.Path[len(c.Path)-1] == "fail" {
				return nil, &CallError{Kind: "Refused", Message: "refused " + strings.Join(c.Path, ".")}
			}
			return func(context.Context) (json.RawMessage, error) { return c.Input, nil }, nil
		},
	}
}

func runJS(t *testing.T, req Request) Result {
	t.Helper()
	res, err := sb(t).Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestMemberNamesAreOrdinaryProperties(t *testing.T) {
	ns := echoNS("api", []string{"__proto__"}, []string{"constructor"}, []string{"a b", "c"}, []string{"fail"})
	res := runJS(t, Request{Bindings: []Namespace{ns}, Program: `(async () => [
		Object.keys(api), typeof api.__proto__, typeof api.constructor,
		await api.__proto__({ p: 1 }), await api.constructor({ c: 2 }), await api["a b"].c({ d: 3 }),
		Object.keys(api["a b"]), "__proto__" in api, Object.keys(api.nothing),
	])()`})
	want := `[["__proto__","constructor","a b","fail"],"function","function",{"p":1},{"c":2},{"d":3},["c"],true,[]]`
	if res.Failure != nil || string(res.Value) != want {
		t.Errorf("got %s %+v, want %s", res.Value, res.Failure, want)
	}
}

func TestErrorClass(t *testing.T) {
	res := runJS(t, Request{Bindings: []Namespace{echoNS("api", []string{"fail"})}, Program: `(async () => {
		try { await api.fail({}) } catch (e) {
			return [e instanceof CallFailed, e instanceof Error, e.name, e.kind, e.member, e.message, Object.keys(e)]
		}
	})()`})
	want := `[true,true,"CallFailed","Refused","fail","refused fail",["kind","member"]]`
	if string(res.Value) != want {
		t.Errorf("got %s %+v, want %s", res.Value, res.Failure, want)
	}
	// Uncaught, the failure carries the kind and the member.
	res = runJS(t, Request{Bindings: []Namespace{echoNS("api", []string{"fail"})}, Program: `api.fail({})`})
	if f := res.Failure; f == nil || f.Kind != Exception || f.Code != "Refused" || f.Member != "fail" || f.Name != "CallFailed" {
		t.Errorf("uncaught: %+v", res.Failure)
	}
}

func TestInvalidRequests(t *testing.T) {
	admit := func(Call) (Work, error) { return nil, nil }
	for name, ns := range map[string][]Namespace{
		"bad name":          {{Name: "1tools", Admit: admit}},
		"reserved word":     {{Name: "class", Admit: admit}},
		"owned global":      {{Name: "console", Admit: admit}},
		"duplicate":         {{Name: "a", Admit: admit}, {Name: "a", Admit: admit}},
		"no admit":          {{Name: "a"}},
		"empty path":        {{Name: "a", Admit: admit, Members: [][]string{{}}}},
		"bad error class":   {{Name: "a", Admit: admit, ErrorClass: &ErrorClass{Name: "Error", Member: "m"}}},
		"member is kind":    {{Name: "a", Admit: admit, ErrorClass: &ErrorClass{Name: "E", Member: "kind"}}},
		"member is stack":   {{Name: "a", Admit: admit, ErrorClass: &ErrorClass{Name: "E", Member: "stack"}}},
		"member is cause":   {{Name: "a", Admit: admit, ErrorClass: &ErrorClass{Name: "E", Member: "cause"}}},
		"member __x__":      {{Name: "a", Admit: admit, ErrorClass: &ErrorClass{Name: "E", Member: "__proto__"}}},
		"member toString":   {{Name: "a", Admit: admit, ErrorClass: &ErrorClass{Name: "E", Member: "toString"}}},
		"member not a name": {{Name: "a", Admit: admit, ErrorClass: &ErrorClass{Name: "E", Member: "a b"}}},
	} {
		if _, err := sb(t).Run(context.Background(), Request{Program: "1", Bindings: ns}); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: got %v, want ErrInvalidRequest", name, err)
		}
	}
}

func TestFailureKinds(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  Request
		kind FailureKind
		also func(*Failure) bool
	}{
		{"exception", Request{Program: "(async () => { null.x })()"}, Exception,
			func(f *Failure) bool { return f.Name == "TypeError" && f.Line == 1 }},
		{"syntax", Request{Program: "(async () => { return 1 +* 2 })()"}, Exception,
			func(f *Failure) bool { return f.Syntax && f.Name == "SyntaxError" }},
		{"deadlock", Request{Program: "new Promise(() => {})"}, Exception,
			func(f *Failure) bool { return f.Deadlock }},
		{"timeout", Request{Program: "for (;;) {}", Timeout: 50 * time.Millisecond}, Timeout, nil},
		{"memory", Request{Program: "'x'.repeat(2 ** 28)", MemoryBytes: 16 << 20}, Memory, nil},
		{"invalid output", Request{Program: "({ f() {} })"}, InvalidOutput,
			func(f *Failure) bool { return strings.Contains(f.Message, "function") }},
		{"output limit", Request{Program: "'abcdef'", MaxOutputBytes: 4}, OutputLimit, nil},
		{"native recursion", Request{Program: "function f(n) { return n ? [f(n - 1)].map(g) : 0 } function g(x) { return x } f(1e6)"}, Exception,
			func(f *Failure) bool { return f.Name == "RangeError" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runJS(t, tc.req)
			if res.Failure == nil || res.Failure.Kind != tc.kind || (tc.also != nil && !tc.also(res.Failure)) {
				t.Errorf("got %+v (value %s), want kind %s", res.Failure, res.Value, tc.kind)
			}
		})
	}
	res := runJS(t, Request{Program: "'abcdef'", MaxOutputBytes: 4})
	if string(res.Value) != `"abc` || res.ValueBytes != 8 {
		t.Errorf("output limit value %q (%d bytes)", res.Value, res.ValueBytes)
	}
	// Abort: the caller's context.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	res, err := sb(t).Run(ctx, Request{Program: "for (;;) {}"})
	if err != nil || res.Failure == nil || res.Failure.Kind != Abort {
		t.Errorf("abort: %+v %v", res.Failure, err)
	}
}

func TestTimersLiveInsideTheRun(t *testing.T) {
	var calls atomic.Int32
	ns := Namespace{Name: "api", Members: [][]string{{"hit"}}, Admit: func(Call) (Work, error) {
		calls.Add(1)
		return nil, nil
	}}
	res := runJS(t, Request{Bindings: []Namespace{ns}, Program: `(async () => {
		const seen = []
		setTimeout(() => seen.push("b"), 20)
		setTimeout(() => seen.push("a"), 5)
		const id = setInterval(() => { seen.push("i"); if (seen.filter((x) => x === "i").length === 3) clearInterval(id) }, 1)
		setTimeout(() => api.hit({}), 500)
		await new Promise((r) => setTimeout(r, 60))
		return seen.filter((x) => x !== "i").concat([seen.filter((x) => x === "i").length])
	})()`})
	if string(res.Value) != `["a","b",3]` {
		t.Errorf("got %s %+v", res.Value, res.Failure)
	}
	time.Sleep(600 * time.Millisecond)
	if calls.Load() != 0 {
		t.Error("a timer fired after its run ended")
	}
}

func TestLogCap(t *testing.T) {
	res := runJS(t, Request{Program: `for (let i = 0; i < 100; i++) console.log("line " + i)`, MaxLogBytes: 50})
	if len(res.Logs) == 0 || res.LogsDropped == 0 || len(res.Logs)+res.LogsDropped != 100 || res.Logs[0].Text != "line 0" {
		t.Errorf("kept %d, dropped %d", len(res.Logs), res.LogsDropped)
	}
}

func TestCloseWaitsForRuns(t *testing.T) {
	s, err := New(context.Background(), testOptions(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Result, 1)
	started := make(chan struct{})
	ns := Namespace{Name: "api", Members: [][]string{{"started"}}, Admit: func(Call) (Work, error) {
		close(started)
		return func(context.Context) (json.RawMessage, error) { return json.RawMessage("null"), nil }, nil
	}}
	go func() {
		res, _ := s.Run(context.Background(), Request{Bindings: []Namespace{ns},
			Program: `(async () => { await api.started({}); await new Promise((r) => setTimeout(r, 200)); return "finished" })()`})
		done <- res
	}()
	// The run is in flight once its program runs: however long the
	// engine took to start it on a loaded machine.
	<-started
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Error("Close did not wait")
	}
	// Run returns a moment after the run is done, so its result is waited
	// for; what matters is that the run finished rather than being cut.
	select {
	case res := <-done:
		if res.Failure != nil || string(res.Value) != `"finished"` {
			t.Errorf("the in-flight run did not finish: %+v %s", res.Failure, res.Value)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the in-flight run never returned")
	}
	if _, err := s.Run(context.Background(), Request{Program: "1"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	s := sb(t)
	if l := s.Language(); l.Name != "JavaScript" || !strings.Contains(l.Engine, "QuickJS-NG") {
		t.Errorf("Language() = %+v", l)
	}
	if i := s.Isolation(); i.Mechanism != "wasm" || i.Description == "" {
		t.Errorf("Isolation() = %+v", i)
	}
}
