package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func mustNew(t *testing.T, opts Options) *Runtime {
	t.Helper()
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func run(t *testing.T, rt *Runtime, code string) Result {
	t.Helper()
	res, err := rt.Execute(context.Background(), code)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	return res
}

// resultJSON is a Result's JSON with every durationMs zero: durations are
// the machine's timing (an instant tool takes a millisecond under the race
// detector), not the run's behaviour.
func resultJSON(r Result) string {
	if r.ToolCalls != nil {
		r.ToolCalls = append([]ToolCall{}, r.ToolCalls...)
	}
	for i := range r.ToolCalls {
		r.ToolCalls[i].DurationMs, r.ToolCalls[i].StartMs = 0, 0
	}
	b, _ := json.Marshal(r)
	return string(b)
}

type addIn struct {
	A int `json:"a" jsonschema:"first addend"`
	B int `json:"b"`
}

func TestNewTool(t *testing.T) {
	add, err := NewTool("Add two integers.", func(_ context.Context, in addIn) (int, error) { return in.A + in.B, nil })
	if err != nil {
		t.Fatal(err)
	}
	if add.Input == nil || add.Input.Properties["a"] == nil || add.Input.Properties["a"].Description != "first addend" {
		t.Errorf("input schema not inferred: %+v", add.Input)
	}
	rt := mustNew(t, Options{Tools: Tools{"math": Tools{"add": add}}})
	if res := run(t, rt, `return await tools.math.add({ a: 2, b: 3 })`); string(res.Value) != "5" {
		t.Errorf("got %s", resultJSON(res))
	}
	res := run(t, rt, `return await tools.math.add({ a: "2", b: 3 })`)
	if res.OK || res.Error.Kind != InvalidToolInput || len(res.ToolCalls) != 0 {
		t.Errorf("string for int: got %s", resultJSON(res))
	}
}

func TestInvalidOptions(t *testing.T) {
	ok := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return nil, nil }}
	for name, opts := range map[string]Options{
		"negative timeout":     {Timeout: -time.Second},
		"tiny memory":          {MaxMemoryBytes: 1000},
		"huge memory":          {MaxMemoryBytes: 1 << 40},
		"negative concurrent":  {MaxConcurrency: -1},
		"reserved namespace":   {Tools: Tools{"$codemode": Tools{"x": ok}}},
		"top-level tool":       {Tools: Tools{"x": ok}},
		"no run":               {Tools: Tools{"ns": Tools{"x": Tool{}}}},
		"nil tool":             {Tools: Tools{"ns": Tools{"x": (*Tool)(nil)}}},
		"nil node":             {Tools: Tools{"ns": Tools{"x": nil}}},
		"reserved name then":   {Tools: Tools{"ns": Tools{"then": ok}}},
		"reserved name toJSON": {Tools: Tools{"toJSON": Tools{"x": ok}}},
		"empty name":           {Tools: Tools{"ns": Tools{"": ok}}},
		"NUL in a name":        {Tools: Tools{"ns": Tools{"a\x00b": ok}}},
	} {
		if _, err := New(opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: got %v, want ErrInvalidOptions", name, err)
		}
		if _, err := Execute(context.Background(), opts, "return 1"); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Execute got %v, want ErrInvalidOptions", name, err)
		}
	}
}

// Execute(ctx, opts, code) ≡ New(opts).Execute(ctx, code).
func TestExecuteLaw(t *testing.T) {
	echo := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	opts := Options{Tools: Tools{"ns": Tools{"echo": echo}}, MaxToolCalls: 2, MaxOutputBytes: 200}
	rt := mustNew(t, opts)
	for _, code := range []string{
		`return 1`,
		`console.log("x"); return await tools.ns.echo({ a: 1 })`,
		`await tools.ns.echo({}); await tools.ns.echo({}); return await tools.ns.echo({})`,
		`return "y".repeat(1000)`,
		`throw new Error("boom")`,
		`return (`,
	} {
		a, errA := Execute(context.Background(), opts, code)
		b, errB := rt.Execute(context.Background(), code)
		if resultJSON(a) != resultJSON(b) || (errA == nil) != (errB == nil) {
			t.Errorf("%s:\nExecute:     %s %v\nNew+Execute: %s %v", code, resultJSON(a), errA, resultJSON(b), errB)
		}
	}
}

func TestCallerCancellation(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	slow := Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	rt := mustNew(t, Options{Tools: Tools{"ns": Tools{"slow": slow}}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	res, err := rt.Execute(ctx, `console.log("before"); return await tools.ns.slow({})`)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res.OK || len(res.Logs) != 1 || len(res.ToolCalls) != 1 {
		t.Errorf("partial result: %s", resultJSON(res))
	}
	// A busy program is cancelled too.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := rt.Execute(ctx, `for (;;) {}`); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("busy program: err = %v", err)
	}
}

func TestHooks(t *testing.T) {
	var mu sync.Mutex
	var starts []Call
	var ends []CallEnd
	ok := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	bad := Tool{Run: func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("postgres://admin:hunter2@db/prod refused")
	}}
	rt := mustNew(t, Options{
		Tools: Tools{"ns": Tools{"ok": ok, "bad": bad}},
		OnToolCallStart: func(_ context.Context, s Call) {
			mu.Lock()
			starts = append(starts, s)
			mu.Unlock()
			panic("a hook panics; the run must not notice")
		},
		OnToolCallEnd: func(_ context.Context, e CallEnd) {
			mu.Lock()
			ends = append(ends, e)
			mu.Unlock()
		},
	})
	res := run(t, rt, `const a = await tools.ns.ok({ n: 1 }); try { await tools.ns.bad({}) } catch (e) { return [a, e.message] }`)
	if got := string(res.Value); got != `[{"n":1},"Tool execution failed"]` {
		t.Fatalf("got %s", resultJSON(res))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 2 || starts[0].Index != 0 || starts[0].Name != "ns.ok" || string(starts[0].Input) != `{"n":1}` || starts[1].Index != 1 {
		t.Errorf("starts = %+v", starts)
	}
	if len(ends) != 2 || ends[0].Outcome != "ok" || ends[1].Outcome != "error" || ends[1].Message != "Tool execution failed" || ends[1].Err == nil {
		t.Errorf("ends = %+v", ends)
	}
	if strings.Contains(resultJSON(res), "hunter2") {
		t.Error("secret leaked into the result")
	}
}

func TestConcurrencyCapAndOrder(t *testing.T) {
	var active, peak atomic.Int32
	probe := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) {
		n := active.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		var v struct{ I int }
		_ = json.Unmarshal(in, &v)
		time.Sleep(5 * time.Millisecond)
		active.Add(-1)
		return v.I, nil
	}}
	rt := mustNew(t, Options{Tools: Tools{"ns": Tools{"probe": probe}}, MaxConcurrency: 3})
	res := run(t, rt, `return (await Promise.all(Array.from({ length: 12 }, (_, i) => tools.ns.probe({ i })))).length`)
	if string(res.Value) != "12" || len(res.ToolCalls) != 12 {
		t.Fatalf("got %s", resultJSON(res))
	}
	if p := peak.Load(); p != 3 {
		t.Errorf("peak concurrency %d, want 3", p)
	}
}

func TestToolPanicAndBadOutput(t *testing.T) {
	boom := Tool{Run: func(context.Context, json.RawMessage) (any, error) { panic("secret-panic-detail") }}
	cyclic := Tool{Run: func(context.Context, json.RawMessage) (any, error) {
		return map[string]any{"f": func() {}}, nil
	}}
	deep := Tool{Run: func(context.Context, json.RawMessage) (any, error) {
		return json.RawMessage(strings.Repeat("[", 40) + strings.Repeat("]", 40)), nil
	}}
	rt := mustNew(t, Options{Tools: Tools{"ns": Tools{"boom": boom, "cyclic": cyclic, "deep": deep}}})
	res := run(t, rt, `return await tools.ns.boom({})`)
	if res.OK || res.Error.Kind != ToolFailure || res.Error.Message != "Tool execution failed" || strings.Contains(resultJSON(res), "secret-panic") {
		t.Errorf("panic: %s", resultJSON(res))
	}
	for _, name := range []string{"cyclic", "deep"} {
		res := run(t, rt, `return await tools.ns.`+name+`({})`)
		if res.OK || res.Error.Kind != InvalidToolOutput || len(res.ToolCalls) != 1 {
			t.Errorf("%s: %s", name, resultJSON(res))
		}
	}
}

func TestUnknownToolSuggestions(t *testing.T) {
	ok := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return 1, nil }}
	rt := mustNew(t, Options{Tools: Tools{"orders": Tools{"lookup": ok, "list": ok}}})
	res := run(t, rt, `return await tools.order.lookup({})`)
	if res.OK || res.Error.Kind != UnknownTool || len(res.Error.Suggestions) == 0 || !strings.Contains(res.Error.Suggestions[0], "tools.orders.lookup") {
		t.Errorf("got %s", resultJSON(res))
	}
}

func TestUnawaitedFailure(t *testing.T) {
	fail := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return nil, ToolError("nope") }}
	rt := mustNew(t, Options{Tools: Tools{"ns": Tools{"fail": fail}}})
	res := run(t, rt, `tools.ns.fail({}); return "done"`)
	if res.OK || res.Error.Kind != ToolFailure || !strings.Contains(res.Error.Message, "nope") {
		t.Fatalf("got %s", resultJSON(res))
	}
	found := false
	for _, s := range res.Error.Suggestions {
		found = found || strings.Contains(s, "Await")
	}
	if !found {
		t.Errorf("no suggestion to await: %v", res.Error.Suggestions)
	}
	// Handled later, it does not fail the run.
	res = run(t, rt, `const p = tools.ns.fail({}); await new Promise((r) => setTimeout(r, 20)); try { await p } catch (e) { return e.message }`)
	if !res.OK || string(res.Value) != `"nope"` {
		t.Errorf("handled late: %s", resultJSON(res))
	}
}

func TestRaceCancelsLosers(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	slow := Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		select {
		case <-ctx.Done():
			cancelled <- struct{}{}
			return nil, ctx.Err()
		case <-time.After(5 * time.Second):
			return "slow", nil
		}
	}}
	fast := Tool{Run: func(context.Context, json.RawMessage) (any, error) { return "fast", nil }}
	rt := mustNew(t, Options{Tools: Tools{"ns": Tools{"slow": slow, "fast": fast}}})
	res := run(t, rt, `const s = tools.ns.slow({})
		const w = await Promise.race([s, tools.ns.fast({})])
		try { await s; return "loser resolved" } catch (e) { return [w, e.message] }`)
	if !res.OK || !strings.Contains(string(res.Value), "Promise.race") || !strings.HasPrefix(string(res.Value), `["fast"`) {
		t.Fatalf("got %s", resultJSON(res))
	}
	select {
	case <-cancelled:
	case <-time.After(2 * time.Second):
		t.Error("the losing call's context was not cancelled")
	}
}

// TestToolsTreeShape covers tool names that collide with what functions
// and objects carry themselves, and the tree's identity and prototypes.
func TestToolsTreeShape(t *testing.T) {
	named := func(s string) Tool {
		return Tool{Run: func(context.Context, json.RawMessage) (any, error) { return s, nil }}
	}
	rt := mustNew(t, Options{Tools: Tools{"ns": Tools{
		"name": named("name"), "length": named("length"), "call": named("call"),
		"__proto__": named("__proto__"), "constructor": named("constructor"),
	}}})
	res := run(t, rt, `
		const ns = tools.ns
		const out = []
		for (const k of Object.keys(ns)) out.push(k, typeof ns[k], await ns[k]({}), ns[k] === ns[k])
		out.push(Object.getPrototypeOf(ns) === Function.prototype, Object.getPrototypeOf(tools) === Object.prototype)
		out.push("name" in ns, "missing" in ns, typeof ns.missing.deeper, ns.then === undefined)
		try { await ns.missing.deeper({}) } catch (e) { out.push(e.kind, e.tool) }
		try { ns.name = 1 } catch (e) { out.push(e instanceof TypeError) }
		return out`)
	want := `["__proto__","function","__proto__",true,"call","function","call",true,` +
		`"constructor","function","constructor",true,"length","function","length",true,"name","function","name",true,` +
		`true,true,true,false,"function",true,"UnknownTool","ns.missing.deeper",true]`
	if !res.OK || string(res.Value) != want {
		t.Errorf("got %s\nwant value %s", resultJSON(res), want)
	}
}
