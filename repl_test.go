package codemode

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func replRuntime(t *testing.T, opts Options) *Runtime {
	t.Helper()
	double, err := NewTool("Double a number.", func(_ context.Context, in struct {
		N int `json:"n"`
	}) (int, error) {
		return 2 * in.N, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	opts.Tools = Tools{"math": Tools{"double": double}}
	opts.StateKey = testStateKey
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	return mustNew(t, opts)
}

// replCell runs a cell and fails the test on an error.
func replCell(t *testing.T, rt *Runtime, ctx context.Context, state []byte, code string) (Result, []byte) {
	t.Helper()
	res, next, err := rt.ExecuteREPL(ctx, state, code)
	if err != nil {
		t.Fatalf("%q: %v", code, err)
	}
	return res, next
}

// TestREPL: declarations live on from cell to cell, through a state the
// host holds (here passed to a second Runtime, as after a restart).
func TestREPL(t *testing.T) {
	ctx := context.Background()
	rt := replRuntime(t, Options{})
	res, st := replCell(t, rt, ctx, nil, `const orders = [3, 5, 8]
let total = 0
function add(n) { total += n; return total }
orders.length`)
	if !res.OK || string(res.Value) != "3" || len(st) == 0 {
		t.Fatalf("cell 1: %s", resultJSON(res))
	}
	res, st = replCell(t, rt, ctx, st, `for (const o of orders) add(await tools.math.double({ n: o }));
({ total, calls: 3 })`)
	if !res.OK || string(res.Value) != `{"total":32,"calls":3}` || len(res.ToolCalls) != 3 {
		t.Fatalf("cell 2: %s", resultJSON(res))
	}
	// Another Runtime with the same key and engine picks the session up.
	rt2 := replRuntime(t, Options{})
	res, st2 := replCell(t, rt2, ctx, st, "total + orders[0]")
	if !res.OK || string(res.Value) != "35" {
		t.Fatalf("cell 3 on another Runtime: %s", resultJSON(res))
	}

	// TypeScript: types stripped, the cell still a script.
	res, st2 = replCell(t, rt, ctx, st2, "const rate: number = 2\nconst doubled = orders.map((o: number): number => o * rate);\ndoubled")
	if !res.OK || string(res.Value) != "[6,10,16]" {
		t.Fatalf("TypeScript: %s", resultJSON(res))
	}
	if res, _ := replCell(t, rt, ctx, st2, "const z: string = 1 +\n  (rate as any).nope.deeper"); res.OK || res.Error.Location == nil || res.Error.Location.Line != 2 {
		t.Errorf("a TypeScript cell's failure is located in it: %s", resultJSON(res))
	}
	// return at the top level: a ParseError that says what to write.
	res, same := replCell(t, rt, ctx, st2, "return total")
	if res.OK || res.Error.Kind != ParseError || len(res.Error.Suggestions) == 0 || !strings.Contains(res.Error.Suggestions[0], "end it with the expression") || string(same) != string(st2) {
		t.Errorf("return: %s", resultJSON(res))
	}
	// A throw keeps what ran before it.
	res, st3 := replCell(t, rt, ctx, st2, "const before = 1\nthrow new Error('boom')")
	if res.OK || res.Error.Kind != ExecutionFailure || res.Error.Location == nil || res.Error.Location.Line != 2 {
		t.Errorf("throw: %s", resultJSON(res))
	}
	if res, _ := replCell(t, rt, ctx, st3, "before"); string(res.Value) != "1" {
		t.Errorf("after a throw: %s", resultJSON(res))
	}
}

// TestREPLRefusals: what a hostile or careless caller may do with states.
func TestREPLRefusals(t *testing.T) {
	ctx := context.Background()
	rt := replRuntime(t, Options{MaxStateBytes: 2 << 20})
	quick := replRuntime(t, Options{Timeout: 300 * time.Millisecond, MaxStateBytes: 2 << 20})
	_, st := replCell(t, rt, ctx, nil, "const secret = 'mine'; 1")

	// No StateKey: no sessions.
	if _, _, err := mustNew(t, Options{}).ExecuteREPL(ctx, nil, "1"); !errors.Is(err, ErrNoStateKey) {
		t.Errorf("without a key: %v", err)
	}
	// A flipped byte, another key, a suspended run's state. rt sealed st
	// and keeps a copy (sealedStates): equal bytes skip the MAC, and the
	// refusals below must hold on that path too.
	if !rt.sealed.has(st) {
		t.Fatal("the Runtime kept no copy of a REPL state it sealed")
	}
	bad := append([]byte(nil), st...)
	bad[len(bad)/2] ^= 1
	if _, _, err := rt.ExecuteREPL(ctx, bad, "secret"); !errors.Is(err, ErrStateInvalid) {
		t.Errorf("damaged: %v", err)
	}
	other := mustNew(t, Options{StateKey: []byte("another key of thirty-two bytes!!")})
	if _, _, err := other.ExecuteREPL(ctx, st, "secret"); !errors.Is(err, ErrStateInvalid) {
		t.Errorf("another key: %v", err)
	}
	susp := mustNew(t, suspendOptions(nil))
	_, s, err := susp.ExecuteSuspendable(ctx, `return await tools.orders.get({ id: 1 })`)
	if err != nil || s == nil {
		t.Fatalf("suspend: %v %v", s, err)
	}
	if _, _, err := susp.ExecuteREPL(ctx, s.State, "1"); !errors.Is(err, ErrStateInvalid) || !susp.sealed.has(s.State) {
		t.Errorf("a suspended run's state as a session: %v", err)
	}
	if _, _, err := rt.Resume(ctx, st); !errors.Is(err, ErrStateInvalid) {
		t.Errorf("a session's state resumed as a suspended run: %v", err)
	}
	// Another session's state.
	if _, _, err := rt.ExecuteREPL(WithSession(ctx, "eve"), st, "secret"); !errors.Is(err, ErrStateInvalid) {
		t.Errorf("another session: %v", err)
	}
	// A cell that times out keeps nothing: the state given comes back,
	// and the logs say so.
	res, next, err := quick.ExecuteREPL(ctx, st, "const lost = 1\nwhile (true) {}")
	if err != nil || res.Error == nil || res.Error.Kind != TimeoutExceeded || string(next) != string(st) ||
		len(res.Logs) == 0 || !strings.Contains(res.Logs[len(res.Logs)-1], "nothing it declared was kept") {
		t.Errorf("timeout: %s %v", resultJSON(res), err)
	}
	if res, _ := replCell(t, rt, ctx, st, "typeof lost + ' ' + secret"); string(res.Value) != `"undefined mine"` {
		t.Errorf("after a timeout: %s", resultJSON(res))
	}
	// A heap over MaxStateBytes is not kept; the cell's value still comes back.
	res, next = replCell(t, rt, ctx, st, "globalThis.big = Array.from({ length: 1 << 18 }, () => Math.random()); 'done'")
	if !res.OK || string(res.Value) != `"done"` || string(next) != string(st) || !strings.Contains(strings.Join(res.Logs, "\n"), "was not kept") {
		t.Errorf("over MaxStateBytes: %s", resultJSON(res))
	}
}
