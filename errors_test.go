package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestResultErr: Err is nil on success (never a typed nil), and errors.Is
// matches a failure's kind.
func TestResultErr(t *testing.T) {
	rt := mustNew(t, Options{Timeout: 50 * time.Millisecond})
	ok := run(t, rt, `return 1`)
	if err := ok.Err(); err != nil {
		t.Errorf("a successful run: Err() = %v, want nil", err)
	}
	res := run(t, rt, `while (true) {}`)
	err := res.Err()
	if !errors.Is(err, TimeoutExceeded) || errors.Is(err, MemoryLimitExceeded) {
		t.Errorf("Err() = %v: want it to match TimeoutExceeded and nothing else", err)
	}
	var d *Diagnostic
	if !errors.As(err, &d) || d.Kind != TimeoutExceeded {
		t.Errorf("errors.As(*Diagnostic) = %v", d)
	}
}

// TestToolErrorCause: a tool's private cause reaches the host's hook and
// errors.Is, never the program.
func TestToolErrorCause(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/srv/secret/orders.db", Err: fs.ErrPermission}
	failing := Tool{Run: func(context.Context, json.RawMessage) (any, error) {
		return nil, ToolErrorCause("the order store is unavailable", cause)
	}}
	var mu sync.Mutex
	var seen error
	rt := mustNew(t, Options{
		Tools: Tools{"orders": Tools{"lookup": failing}},
		OnToolCallEnd: func(_ context.Context, e CallEnd) {
			mu.Lock()
			seen = e.Err
			mu.Unlock()
		},
	})
	res := run(t, rt, `try { await tools.orders.lookup({}) } catch (e) { return e.message }`)
	if !res.OK || string(res.Value) != `"the order store is unavailable"` || strings.Contains(resultJSON(res), "secret") {
		t.Errorf("the program got %s", resultJSON(res))
	}
	mu.Lock()
	defer mu.Unlock()
	var pe *fs.PathError
	if !errors.Is(seen, fs.ErrPermission) || !errors.As(seen, &pe) || pe.Path != cause.Path {
		t.Errorf("the hook got %v, want the cause reachable", seen)
	}
}

func TestWithUntrustedLimits(t *testing.T) {
	got := Options{}.WithUntrustedLimits()
	if got.Timeout != UntrustedTimeout || got.MaxToolCalls != UntrustedMaxToolCalls || got.MaxOutputBytes != UntrustedMaxOutputBytes {
		t.Errorf("got %+v", got)
	}
	set := Options{Timeout: time.Second, MaxToolCalls: -1, MaxOutputBytes: 5}.WithUntrustedLimits()
	if set.Timeout != time.Second || set.MaxToolCalls != -1 || set.MaxOutputBytes != 5 {
		t.Errorf("set limits were changed: %+v", set)
	}
}

// An ExecutionFailure says its cause: a program that throws or can never
// finish is the program's; errors a host turns into one are classified
// by CauseOf. Other kinds need no cause.
func TestDiagnosticCause(t *testing.T) {
	rt := mustNew(t, Options{Timeout: 200 * time.Millisecond})
	for code, want := range map[string]string{
		`throw new Error("x")`:          CauseProgram,
		`await new Promise(() => {})`:   CauseProgram,
		`for (;;) {}`:                   "",
		`return undefinedThing.field`:   CauseProgram,
		`return await tools.nope.nah()`: "",
	} {
		res, _ := rt.Execute(context.Background(), code)
		if res.Error == nil || res.Error.Cause != want {
			t.Errorf("%s: %s, want cause %q", code, resultJSON(res), want)
		}
	}
	for err, want := range map[error]string{
		context.Canceled: CauseHost,
		fmt.Errorf("x: %w", context.DeadlineExceeded): CauseHost,
		ErrStopped:                   CauseHost,
		ErrEngineMismatch:            CauseEngine,
		ErrStateEngine:               CauseEngine,
		errors.New("something else"): "",
		nil:                          "",
	} {
		if got := CauseOf(err); got != want {
			t.Errorf("CauseOf(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestDescriptor(t *testing.T) {
	d := mustNew(t, Options{}).Descriptor()
	if !strings.Contains(d.Language, "TypeScript") || !strings.Contains(d.Engine, "QuickJS-NG") || len(d.EngineSHA256) != 64 || !strings.Contains(d.Isolation, "WebAssembly") {
		t.Fatalf("%+v", d)
	}
}

// An invalid regular expression says what to fix, whether it is a
// literal the engine refuses or a pattern given to new RegExp.
func TestRegexpErrorsSayWhatToFix(t *testing.T) {
	rt := mustNew(t, Options{})
	for code, kind := range map[string]Kind{
		`return "a".match(/a**/)`:                         ParseError,
		`return /a(b/.test("x")`:                          ParseError,
		`const p = "a(b"; return new RegExp(p).test("x")`: ExecutionFailure,
	} {
		res, _ := rt.Execute(context.Background(), code)
		if res.Error == nil || res.Error.Kind != kind || len(res.Error.Suggestions) == 0 || !strings.Contains(res.Error.Suggestions[0], "quantifier") {
			t.Errorf("%s: %s", code, resultJSON(res))
		}
	}
	res, _ := rt.Execute(context.Background(), `return JSON.parse("{nope")`)
	if res.Error == nil || len(res.Error.Suggestions) == 0 || !strings.Contains(res.Error.Suggestions[0], "JSON.parse") {
		t.Errorf("JSON.parse: %s", resultJSON(res))
	}
}

// import() fails at run time (ExecutionFailure, as the conformance
// contract has it) saying it is not supported, at its place.
func TestDynamicImportUnsupported(t *testing.T) {
	rt := mustNew(t, Options{})
	res, _ := rt.Execute(context.Background(), "const a = 1;\nconst m = await  import(\"fs\");\nreturn m")
	if res.Error == nil || res.Error.Kind != ExecutionFailure || !strings.Contains(res.Error.Message, "import() is not supported") || res.Error.Location == nil || res.Error.Location.Line != 2 || res.Error.Location.Column != 18 {
		t.Fatalf("%s", resultJSON(res))
	}
}
