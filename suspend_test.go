package codemode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codemode-go/codemode/internal/envelope"
	"github.com/codemode-go/codemode/internal/sandbox"
	"github.com/google/jsonschema-go/jsonschema"
)

// suspendTools are the tools of the suspension tests; ran counts the
// calls any of them served.
func suspendTools(ran *atomic.Int64) Tools {
	count := func() {
		if ran != nil {
			ran.Add(1)
		}
	}
	return Tools{
		"orders": Tools{
			"get": Tool{
				Input: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"id": {Type: "integer"}}, Required: []string{"id"}},
				Run: func(ctx context.Context, in json.RawMessage) (any, error) {
					count()
					var v struct{ ID int }
					_ = json.Unmarshal(in, &v)
					return map[string]any{"id": v.ID, "total": v.ID * 10}, nil
				},
			},
			"refund": Tool{Run: func(ctx context.Context, in json.RawMessage) (any, error) {
				count()
				return map[string]any{"refunded": json.RawMessage(in)}, nil
			}},
			"fail": Tool{Run: func(ctx context.Context, in json.RawMessage) (any, error) {
				count()
				return nil, ToolError("order service refused")
			}},
			"crash": Tool{Run: func(ctx context.Context, in json.RawMessage) (any, error) {
				count()
				return nil, errors.New("secret: db password is hunter2")
			}},
			"odd": Tool{Run: func(ctx context.Context, in json.RawMessage) (any, error) {
				count()
				return map[string]any{"f": func() {}}, nil
			}},
		},
	}
}

func suspendOptions(ran *atomic.Int64) Options {
	return Options{Tools: suspendTools(ran), StateKey: testStateKey, Timeout: 10 * time.Second}
}

// serve drives a suspendable run to its end, resuming each time in a new
// Runtime with every pending call's result (from Runtime.Call).
func serve(t *testing.T, opts Options, code string) (Result, []*Suspended) {
	t.Helper()
	ctx := context.Background()
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	res, s, err := rt.ExecuteSuspendable(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	var steps []*Suspended
	for s != nil {
		steps = append(steps, s)
		if len(steps) > 100 {
			t.Fatal("more than 100 suspensions")
		}
		fresh, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		var results []CallResult
		for _, p := range s.Pending {
			results = append(results, fresh.RunPending(ctx, p))
		}
		res, s, err = fresh.Resume(ctx, s.State, results...)
		fresh.Close()
		if err != nil {
			t.Fatalf("Resume: %v", err)
		}
	}
	return res, steps
}

func TestSuspendedRunMatchesExecute(t *testing.T) {
	programs := map[string]string{
		"sequential": `const a = await tools.orders.get({ id: 1 }); const b = await tools.orders.get({ id: a.total }); return [a, b]`,
		"parallel":   `return await Promise.all([1, 2, 3].map((id) => tools.orders.get({ id })))`,
		"loop": `let sum = 0
for (let id = 1; id <= 5; id++) { const o = await tools.orders.get({ id }); console.log("order", id, o.total); sum += o.total }
return sum`,
		"catch":     `try { await tools.orders.fail({}) } catch (e) { return [e.name, e.kind, e.message, e.tool] }`,
		"crash":     `try { await tools.orders.crash({}) } catch (e) { return e.message }`,
		"uncaught":  "const o = await tools.orders.get({ id: 1 })\nawait tools.orders.fail({ id: o.id })",
		"unawaited": `tools.orders.fail({}); return "returned first"`,
		"race":      `return await Promise.race([tools.orders.get({ id: 1 }), new Promise(() => {})])`,
		"invalid":   `try { await tools.orders.odd({}) } catch (e) { return [e.kind, e.message] }`,
		"input":     `try { await tools.orders.get({ id: "x" }) } catch (e) { return e.kind }`,
		"unknown":   `try { await tools.orders.nope({}) } catch (e) { return e.kind }`,
		"state": `Array.prototype.total = function () { return this.reduce((a, o) => a + o.total, 0) }
globalThis.seen = []
for (const id of [4, 5]) seen.push(await tools.orders.get({ id }))
const t0 = performance.now()
const x = await tools.orders.get({ id: 6 })
return [seen.total(), x.total, performance.now() >= t0, typeof Math.random()]`,
		"typescript": `interface Order { id: number; total: number }
const o: Order = await tools.orders.get({ id: 7 })
return o.total as number`,
		"search":  `const r = await tools.$codemode.search({ query: "refund" }); return r.items.length > 0`,
		"timers":  `const later = new Promise((r) => setTimeout(() => r("timer"), 5)); const o = await tools.orders.get({ id: 1 }); return [o.id, await later]`,
		"nothing": `return 42`,
		"logs":    `console.log("before"); const o = await tools.orders.get({ id: 1 }); console.warn("after", o.total); return null`,
		"limit": `const out = []
for (let id = 1; id <= 5; id++) { try { out.push((await tools.orders.get({ id })).id) } catch (e) { out.push(e.kind) } }
return out`,
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range programs {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		code := programs[name]
		t.Run(name, func(t *testing.T) {
			opts := suspendOptions(nil)
			if name == "limit" {
				opts.MaxToolCalls = 3
			}
			direct, err := Execute(context.Background(), opts, code)
			if err != nil {
				t.Fatal(err)
			}
			res, steps := serve(t, opts, code)
			if d := sameResult(direct, res); d != "" {
				t.Fatalf("results differ in %s\ndirect:    %s\nsuspended: %s", d, clip(direct), clip(res))
			}
			if name != "nothing" && name != "search" && name != "input" && name != "unknown" && len(steps) == 0 {
				t.Fatalf("the run never suspended: %s", clip(res))
			}
			if name == "crash" && strings.Contains(string(clip(res)), "hunter2") {
				t.Fatal("the tool's private error reached the result")
			}
		})
	}
}

func TestResumeOneResultAtATime(t *testing.T) {
	ctx := context.Background()
	opts := suspendOptions(nil)
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	res, s, err := rt.ExecuteSuspendable(ctx, `const order = []
const ps = [1, 2, 3].map((id) => tools.orders.get({ id }).then((o) => { order.push(o.id); return o.total }))
return [await Promise.all(ps), order]`)
	if err != nil || s == nil {
		t.Fatalf("not suspended: %v %s", err, clip(res))
	}
	if len(s.Pending) != 3 || s.Step != 1 || s.RunID == "" {
		t.Fatalf("first suspension: %+v", s)
	}
	for _, c := range res.ToolCalls {
		if c.Outcome != OutcomePending {
			t.Fatalf("suspended audit %+v", res.ToolCalls)
		}
	}
	in, err := rt.Inspect(s.State)
	if err != nil || in.RunID != s.RunID || in.Step != 1 || !reflect.DeepEqual(in.Pending, s.Pending) {
		t.Fatalf("Inspect: %v %+v, want %+v", err, in, s)
	}
	bad := slices.Clone(s.State)
	bad[len(bad)/2] ^= 1
	if _, err := rt.Inspect(bad); !errors.Is(err, ErrStateInvalid) {
		t.Fatalf("Inspect of a damaged state: %v", err)
	}
	runID := s.RunID
	// Deliver the last call's result first, then the others.
	for want := 2; s != nil; want-- {
		p := s.Pending[len(s.Pending)-1]
		res, s, err = rt.Resume(ctx, s.State, rt.RunPending(ctx, p))
		if err != nil {
			t.Fatal(err)
		}
		if s != nil && (len(s.Pending) != want || s.RunID != runID || s.Step != 4-want) {
			t.Fatalf("after one result: %d pending, run %s step %d", len(s.Pending), s.RunID, s.Step)
		}
	}
	if string(res.Value) != `[[10,20,30],[3,2,1]]` {
		t.Fatalf("value %s, want the results in the order delivered", res.Value)
	}
	for _, c := range res.ToolCalls {
		if c.Outcome != OutcomeOK {
			t.Fatalf("audit %+v", res.ToolCalls)
		}
	}
}

func TestResumeRefuses(t *testing.T) {
	ctx := context.Background()
	var ran atomic.Int64
	opts := suspendOptions(&ran)
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	_, s1, err := rt.ExecuteSuspendable(ctx, `const a = await tools.orders.get({ id: 1 }); const b = await tools.orders.get({ id: 2 }); return [a, b]`)
	if err != nil || s1 == nil {
		t.Fatal("not suspended", err)
	}
	_, s2, err := rt.Resume(ctx, s1.State, rt.RunPending(ctx, s1.Pending[0]))
	if err != nil || s2 == nil {
		t.Fatal("not suspended again", err)
	}
	ran.Store(0)
	good := CallResult{Index: s2.Pending[0].Index, Output: json.RawMessage(`{"id":2,"total":20}`)}

	flip := func(at int) []byte {
		b := slices.Clone(s2.State)
		b[at] ^= 0x20
		return b
	}
	other := opts
	other.StateKey = []byte("another key, also 32 bytes long!")
	rtOtherKey, _ := New(other)
	defer rtOtherKey.Close()
	more := opts
	more.Tools = suspendTools(&ran)
	more.Tools["orders"].(Tools)["cancel"] = Tool{Run: func(context.Context, json.RawMessage) (any, error) { return nil, nil }}
	rtMoreTools, _ := New(more)
	defer rtMoreTools.Close()
	changed := opts
	changed.Tools = suspendTools(&ran)
	g := changed.Tools["orders"].(Tools)["get"].(Tool)
	g.Input = &jsonschema.Schema{Type: "object"}
	changed.Tools["orders"].(Tools)["get"] = g
	rtChanged, _ := New(changed)
	defer rtChanged.Close()
	// A state with a valid MAC but another engine build's name: only a
	// holder of the key could make it, and it is still refused.
	h, inner, err := rt.openState(s2.State)
	if err != nil {
		t.Fatal(err)
	}
	h.Engine = strings.Repeat("0", 64)
	otherEngine, err := rt.sealState(ctx, time.Time{}, h, sandbox.State{Header: h.Sandbox, Snapshot: inner.Snapshot})
	if err != nil {
		t.Fatal(err)
	}

	// rt sealed s2 last but one, and keeps a copy: equal bytes skip the
	// MAC (sealedStates), so every flipped byte below must still be
	// refused by it.
	if !rt.sealed.has(s2.State) {
		t.Fatal("the Runtime kept no copy of a state it sealed")
	}
	cases := []struct {
		name    string
		rt      *Runtime
		state   []byte
		results []CallResult
		want    error
	}{
		{"empty", rt, nil, nil, ErrStateInvalid},
		{"not a state", rt, []byte("hello, this is not a state at all, really not"), nil, ErrStateInvalid},
		{"truncated", rt, s2.State[:len(s2.State)-1], nil, ErrStateInvalid},
		{"cut in half", rt, s2.State[:len(s2.State)/2], nil, ErrStateInvalid},
		{"flipped magic", rt, flip(0), nil, ErrStateInvalid},
		{"flipped header", rt, flip(20), nil, ErrStateInvalid},
		{"flipped snapshot", rt, flip(len(s2.State) - 100), nil, ErrStateInvalid},
		{"flipped mac", rt, flip(len(s2.State) - 1), nil, ErrStateInvalid},
		{"other key", rtOtherKey, s2.State, []CallResult{good}, ErrStateInvalid},
		{"tool added", rtMoreTools, s2.State, []CallResult{good}, ErrStateTools},
		{"schema changed", rtChanged, s2.State, []CallResult{good}, ErrStateTools},
		{"other engine", rt, otherEngine, []CallResult{good}, ErrStateEngine},
		{"call not pending", rt, s2.State, []CallResult{{Index: 7, Output: json.RawMessage(`1`)}}, ErrStateCall},
		{"call twice", rt, s2.State, []CallResult{good, good}, ErrStateCall},
		{"replayed with a result for a later call", rt, s1.State, []CallResult{good}, ErrStateCall},
		{"answered call again", rt, s2.State, []CallResult{{Index: s1.Pending[0].Index, Output: json.RawMessage(`{}`)}}, ErrStateCall},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, s, err := c.rt.Resume(ctx, c.state, c.results...)
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
			if s != nil || res.OK || res.ToolCalls == nil {
				t.Fatalf("refused resume returned %+v, %+v", res, s)
			}
		})
	}
	for at := 0; at < len(s2.State); at += 97 { // every part of the state
		if _, _, err := rt.Resume(ctx, flip(at), good); !errors.Is(err, ErrStateInvalid) {
			t.Fatalf("byte %d flipped: %v", at, err)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("tools ran %d times for refused states", n)
	}
	// The untouched state still resumes, more than once (it is a value).
	for range 2 {
		res, s, err := rt.Resume(ctx, s2.State, good)
		if err != nil || s != nil || string(res.Value) != `[{"id":1,"total":10},{"id":2,"total":20}]` {
			t.Fatalf("resume: %v %v %s", err, s, clip(res))
		}
	}
}

// TestResumeLegacyState: a state an earlier version sealed, its MAC over
// all its bytes (CMSTATE3), still resumes, is inspected and compacts; a
// state relabelled from one way of sealing to the other is refused.
func TestResumeLegacyState(t *testing.T) {
	ctx := context.Background()
	opts := suspendOptions(nil)
	rt := mustNew(t, opts)
	_, s, err := rt.ExecuteSuspendable(ctx, `const a = await tools.orders.get({ id: 1 }); return a.total * 2`)
	if err != nil || s == nil {
		t.Fatal("not suspended", err)
	}
	var head json.RawMessage
	body, err := envelope.OpenSealed(s.State, stateKind.magic, &head)
	if err != nil {
		t.Fatal(err)
	}
	legacy := envelope.Seal(slices.Clone(body), stateKind.legacy, head, opts.StateKey)
	// Another Runtime: no copies of what rt sealed, every state is
	// authenticated.
	fresh := mustNew(t, opts)
	good := CallResult{Index: s.Pending[0].Index, Output: json.RawMessage(`{"id":1,"total":10}`)}
	if _, err := fresh.Inspect(legacy); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	compact, err := fresh.CompactState(ctx, legacy)
	if err != nil || !envelope.HasMagic(compact, stateKind.magic) {
		t.Fatalf("compact: %v", err)
	}
	for name, state := range map[string][]byte{"legacy": legacy, "compacted from legacy": compact, "current": s.State} {
		res, next, err := fresh.Resume(ctx, state, good)
		if err != nil || next != nil || string(res.Value) != "20" {
			t.Fatalf("%s: %v %v %s", name, err, next != nil, clip(res))
		}
	}
	relabel := func(b []byte, magic string) []byte {
		c := slices.Clone(b)
		copy(c[len(c)-envelope.MACSize-len(magic):], magic)
		return c
	}
	for name, state := range map[string][]byte{
		"current relabelled legacy": relabel(s.State, stateKind.legacy),
		"legacy relabelled current": relabel(legacy, stateKind.magic),
		"legacy, a byte flipped":    flipAt(legacy, len(legacy)/2),
	} {
		if _, _, err := fresh.Resume(ctx, state, good); !errors.Is(err, ErrStateInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestStepsDecodedWithDigests: a state decoded cold (another Runtime,
// its writer's warm instance displaced) hands the digests its opening
// computed to the resumed instance, and the next state, whose unchanged
// blocks reuse them, opens on yet another Runtime: its MAC, computed over
// those digests, is the MAC of its bytes.
func TestStepsDecodedWithDigests(t *testing.T) {
	ctx := context.Background()
	opts := suspendOptions(nil)
	rts := make([]*Runtime, 2)
	for i := range rts {
		rt, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		rts[i] = rt
	}
	const program = `globalThis.rows = Array.from({ length: 20000 }, (_, i) => ({ i, s: "row " + i }));
		let n = 0;
		for (let k = 1; k <= 6; k++) n += (await tools.orders.get({ id: k })).total;
		return n + rows.length`
	_, s, err := rts[0].ExecuteSuspendable(ctx, program)
	if err != nil || s == nil {
		t.Fatal("not suspended", err)
	}
	var res Result
	for step := 1; s != nil; step++ {
		// Two other runs suspend on the same image, displacing the warm
		// instance that wrote s.
		for range 2 {
			if _, other, err := rts[0].ExecuteSuspendable(ctx, `await tools.orders.get({ id: 1 }); return 0`); err != nil || other == nil {
				t.Fatal("the displacing run did not suspend", err)
			}
		}
		rt := rts[step%2] // not the Runtime that sealed s: no copy of it
		res, s, err = rt.Resume(ctx, s.State, rt.RunPending(ctx, s.Pending[0]))
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if !res.OK || string(res.Value) != "20210" {
		t.Fatalf("%s", clip(res))
	}
}

func flipAt(b []byte, i int) []byte {
	c := slices.Clone(b)
	c[i] ^= 1
	return c
}

func TestSuspendNeedsAKey(t *testing.T) {
	opts := suspendOptions(nil)
	opts.StateKey = nil
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, _, err := rt.ExecuteSuspendable(context.Background(), `return 1`); !errors.Is(err, ErrNoStateKey) {
		t.Fatalf("ExecuteSuspendable without a key: %v", err)
	}
	if _, _, err := rt.Resume(context.Background(), []byte("x")); !errors.Is(err, ErrNoStateKey) {
		t.Fatalf("Resume without a key: %v", err)
	}
	opts.StateKey = []byte("short")
	if _, err := New(opts); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("short key: %v", err)
	}
}

// suspendOnce runs code until it first suspends.
func suspendOnce(t *testing.T, rt *Runtime, code string) *Suspended {
	t.Helper()
	res, s, err := rt.ExecuteSuspendable(context.Background(), code)
	if err != nil || s == nil {
		t.Fatalf("not suspended: %v %s", err, clip(res))
	}
	return s
}

func TestSuspendedTimeAndTimeout(t *testing.T) {
	ctx := context.Background()
	busy := `const spin = (ms) => { const end = Date.now() + ms; while (Date.now() < end) {} }
spin(1500)
const o = await tools.orders.get({ id: 1 })
spin(1500)
return o.total`

	t.Run("running time counts", func(t *testing.T) {
		opts := suspendOptions(nil)
		// Wide margins: the first spin must end before the limit on a
		// busy machine under -race, and both together must pass it.
		opts.Timeout = 2 * time.Second
		rt, _ := New(opts)
		defer rt.Close()
		s := suspendOnce(t, rt, busy)
		if !s.Deadline.IsZero() {
			t.Fatalf("a deadline without TimeoutIncludesSuspended: %v", s.Deadline)
		}
		res, s, err := rt.Resume(ctx, s.State, rt.RunPending(ctx, s.Pending[0]))
		if err != nil || s != nil || !errors.Is(res.Err(), TimeoutExceeded) {
			t.Fatalf("1.5 + 1.5 s of running against 2 s: %v %s", err, clip(res))
		}
		if !strings.Contains(res.Error.Message, "2s") {
			t.Fatalf("message %q does not name the run's limit", res.Error.Message)
		}
	})
	t.Run("time away does not count", func(t *testing.T) {
		opts := suspendOptions(nil)
		opts.Timeout = 500 * time.Millisecond
		rt, _ := New(opts)
		defer rt.Close()
		s := suspendOnce(t, rt, `const o = await tools.orders.get({ id: 1 }); return o.total`)
		time.Sleep(700 * time.Millisecond)
		res, _, err := rt.Resume(ctx, s.State, rt.RunPending(ctx, s.Pending[0]))
		if err != nil || !res.OK {
			t.Fatalf("resumed after longer than its timeout: %v %s", err, clip(res))
		}
	})
	t.Run("time away counts when asked", func(t *testing.T) {
		var ran atomic.Int64
		opts := suspendOptions(&ran)
		opts.Timeout = 200 * time.Millisecond
		opts.TimeoutIncludesSuspended = true
		rt, _ := New(opts)
		defer rt.Close()
		s := suspendOnce(t, rt, `const o = await tools.orders.get({ id: 1 }); console.log("got it"); return o.total`)
		if s.Deadline.IsZero() || time.Until(s.Deadline) > 200*time.Millisecond {
			t.Fatalf("deadline %v", s.Deadline)
		}
		r := rt.RunPending(ctx, s.Pending[0])
		time.Sleep(time.Until(s.Deadline) + 50*time.Millisecond)
		// The resuming Runtime's own setting does not matter: the run keeps its own.
		plain := suspendOptions(&ran)
		rt2, _ := New(plain)
		defer rt2.Close()
		res, s2, err := rt2.Resume(ctx, s.State, r)
		if err != nil || s2 != nil || !errors.Is(res.Err(), TimeoutExceeded) || len(res.Logs) != 0 {
			t.Fatalf("resumed after its deadline: %v %s", err, clip(res))
		}
		// The call was made in time: the audit says how it went, though
		// the program never saw it.
		if res.ToolCalls[0].Outcome != OutcomeOK {
			t.Fatalf("the call the run timed out waiting for: %+v", res.ToolCalls)
		}
		// Made after the deadline, the call is not made at all.
		made := ran.Load()
		late := rt.RunPending(ctx, s.Pending[0])
		if !errors.Is(late.Err, ErrOutOfTime) || ran.Load() != made {
			t.Fatalf("a call after the deadline: %+v, tool ran %d times more", late, ran.Load()-made)
		}
		res, _, err = rt2.Resume(ctx, s.State, late)
		if err != nil || !errors.Is(res.Err(), TimeoutExceeded) || res.ToolCalls[0].Outcome != OutcomeCancelled {
			t.Fatalf("resumed with a call not made: %v %s", err, clip(res))
		}
	})
	t.Run("timers", func(t *testing.T) {
		code := `setTimeout(() => console.log("timer"), 40)
const o = await tools.orders.get({ id: 1 })
console.log("result")
await new Promise((r) => setTimeout(r, 60))
return o.id`
		for _, counts := range []bool{false, true} {
			opts := suspendOptions(nil)
			opts.TimeoutIncludesSuspended = counts
			rt, _ := New(opts)
			s := suspendOnce(t, rt, code)
			if s.NextTimer <= 0 || s.NextTimer > 40*time.Millisecond {
				t.Fatalf("NextTimer %v", s.NextTimer)
			}
			time.Sleep(80 * time.Millisecond)
			res, _, err := rt.Resume(ctx, s.State, rt.RunPending(ctx, s.Pending[0]))
			rt.Close()
			want := "result,timer" // the time away did not pass for the run
			if counts {
				want = "timer,result" // it did: the timer was due before the result came
			}
			if err != nil || strings.Join(res.Logs, ",") != want {
				t.Fatalf("time away counts %v: logs %q, want %s (%v)", counts, res.Logs, want, err)
			}
		}
	})
	t.Run("resume without results lets timers fire", func(t *testing.T) {
		opts := suspendOptions(nil)
		opts.TimeoutIncludesSuspended = true
		rt, _ := New(opts)
		defer rt.Close()
		s := suspendOnce(t, rt, `const slow = tools.orders.get({ id: 1 })
return await Promise.race([slow, new Promise((r) => setTimeout(() => r("gave up"), 30))])`)
		time.Sleep(s.NextTimer + 10*time.Millisecond)
		res, s2, err := rt.Resume(ctx, s.State)
		if err != nil || s2 != nil || string(res.Value) != `"gave up"` {
			t.Fatalf("%v %v %s", err, s2, clip(res))
		}
		if res.ToolCalls[0].Outcome != OutcomeCancelled {
			t.Fatalf("audit %+v", res.ToolCalls)
		}
	})
}

func TestResumeKeepsTheRunsLimits(t *testing.T) {
	ctx := context.Background()
	opts := suspendOptions(nil)
	opts.MaxMemoryBytes = 4 << 20
	opts.MaxOutputBytes = 200
	opts.MaxToolCalls = 2
	rt, _ := New(opts)
	defer rt.Close()
	s := suspendOnce(t, rt, `const o = await tools.orders.get({ id: 1 })
let calls = 0
try { await tools.orders.get({ id: 2 }); calls++; await tools.orders.get({ id: 3 }); calls++ } catch (e) { console.log(e.kind) }
let big = []
try { for (let i = 0; i < 1e6; i++) big.push("xxxxxxxxxxxxxxxx" + i) } catch (e) { big = null; console.log("out of memory") }
return "y".repeat(500)`)
	wide := suspendOptions(nil) // 64 MiB, no output or call limit
	rt2, _ := New(wide)
	defer rt2.Close()
	var res Result
	var err error
	for s != nil {
		var rs []CallResult
		for _, p := range s.Pending {
			rs = append(rs, rt2.RunPending(ctx, p))
		}
		res, s, err = rt2.Resume(ctx, s.State, rs...)
		if err != nil {
			t.Fatal(err)
		}
	}
	if !errors.Is(res.Err(), MemoryLimitExceeded) && !slices.Contains(res.Logs, "out of memory") {
		t.Fatalf("the 4 MiB limit did not hold after resuming: %s", clip(res))
	}
	if len(res.ToolCalls) != 2 {
		t.Fatalf("MaxToolCalls 2: audit %+v", res.ToolCalls)
	}
	if res.OK && !res.Truncated {
		t.Fatalf("MaxOutputBytes 200: %s", clip(res))
	}
}

func TestResumeAfterClose(t *testing.T) {
	rt, _ := New(suspendOptions(nil))
	s := suspendOnce(t, rt, `return (await tools.orders.get({ id: 1 })).id`)
	rt.Close()
	if _, _, err := rt.Resume(context.Background(), s.State); !errors.Is(err, ErrClosed) {
		t.Fatalf("Resume after Close: %v", err)
	}
	if _, _, err := rt.ExecuteSuspendable(context.Background(), `return 1`); !errors.Is(err, ErrClosed) {
		t.Fatalf("ExecuteSuspendable after Close: %v", err)
	}
}

func TestCallRunsHooksAndChecks(t *testing.T) {
	ctx := context.Background()
	var starts, ends []string
	opts := suspendOptions(nil)
	opts.OnToolCallStart = func(_ context.Context, c Call) { starts = append(starts, fmt.Sprint(c.Index, c.Name)) }
	opts.OnToolCallEnd = func(_ context.Context, c CallEnd) { ends = append(ends, fmt.Sprint(c.Index, c.Name, c.Outcome)) }
	rt, _ := New(opts)
	defer rt.Close()
	s := suspendOnce(t, rt, `const r = await Promise.allSettled([tools.orders.odd({}), tools.orders.crash({}), tools.orders.refund({ id: 9 })])
return r.map((x) => x.status === "fulfilled" ? x.value : [x.reason.kind, x.reason.message])`)
	if len(starts) != 0 {
		t.Fatalf("hooks ran before any call ran: %v", starts)
	}
	var rs []CallResult
	for _, p := range s.Pending {
		rs = append(rs, rt.RunPending(ctx, p))
	}
	res, _, err := rt.Resume(ctx, s.State, rs...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(starts, ";") != "0orders.odd;1orders.crash;2orders.refund" ||
		strings.Join(ends, ";") != "0orders.oddinvalid-output;1orders.crasherror;2orders.refundok" {
		t.Fatalf("hooks: %q %q", starts, ends)
	}
	want := `[["InvalidToolOutput","tools.orders.odd returned something that cannot be encoded as JSON"],["ToolFailure","Tool execution failed"],{"refunded":{"id":9}}]`
	if string(res.Value) != want {
		t.Fatalf("value %s\nwant  %s", res.Value, want)
	}
	// A host may answer for a call itself; what it gives is checked too.
	s = suspendOnce(t, rt, `try { return await tools.orders.refund({ id: 1 }) } catch (e) { return e.kind }`)
	res, _, err = rt.Resume(ctx, s.State, CallResult{Index: s.Pending[0].Index, Output: json.RawMessage(`{"__proto__": 1}`)})
	if err != nil || string(res.Value) != `"InvalidToolOutput"` || res.ToolCalls[0].Outcome != OutcomeInvalidOutput {
		t.Fatalf("host-made output that is not plain data: %v %s", err, clip(res))
	}
	s = suspendOnce(t, rt, `try { return await tools.orders.refund({ id: 1 }) } catch (e) { return e.message }`)
	res, _, _ = rt.Resume(ctx, s.State, CallResult{Index: s.Pending[0].Index, Err: ToolError("denied by the operator")})
	if string(res.Value) != `"denied by the operator"` || res.ToolCalls[0].Outcome != OutcomeError {
		t.Fatalf("a host's refusal: %s", clip(res))
	}
}

func TestSuspendedRunTelemetry(t *testing.T) {
	sink := newOtelSink(t)
	ctx := context.Background()
	opts := suspendOptions(nil)
	opts.TracerProvider = sink.tp
	rt, _ := New(opts)
	defer rt.Close()
	s := suspendOnce(t, rt, `return (await tools.orders.get({ id: 1 })).total`)
	res, _, err := rt.Resume(ctx, s.State, rt.RunPending(ctx, s.Pending[0]))
	if err != nil || !res.OK {
		t.Fatalf("%v %s", err, clip(res))
	}
	steps := sink.named("codemode.execute")
	if len(steps) != 2 {
		t.Fatalf("%d execute spans, want one per step", len(steps))
	}
	if a := attrs(steps[0]); a["codemode.suspended"] != "true" || a["codemode.ok"] != "false" {
		t.Fatalf("the suspended step's span: %v", a)
	}
	if a := attrs(steps[1]); a["codemode.suspended"] != "" || a["codemode.ok"] != "true" {
		t.Fatalf("the last step's span: %v", a)
	}
	calls := sink.named("codemode.tool_call")
	if len(calls) != 1 || attrs(calls[0])["codemode.tool.name"] != "orders.get" {
		t.Fatalf("tool call spans: %v", calls)
	}
}

func TestResumeInterrupted(t *testing.T) {
	rt, _ := New(suspendOptions(nil))
	defer rt.Close()
	s := suspendOnce(t, rt, `const o = await tools.orders.get({ id: 1 }); for (;;) {}`)
	r := rt.RunPending(context.Background(), s.Pending[0])
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, next, err := rt.Resume(ctx, s.State, r)
	if !errors.Is(err, context.DeadlineExceeded) || next != nil || res.OK || res.Error != nil {
		t.Fatalf("cancelled resume: %v %v %s", err, next, clip(res))
	}
	// The state is untouched: the run can be resumed again, and stopped by
	// Close this time.
	done := make(chan error, 1)
	go func() {
		_, _, err := rt.Resume(context.Background(), s.State, r)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	rt.Close()
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("resume stopped by Close: %v", err)
	}
}

// TestStateKeyRotation: a state sealed with the old key resumes under a
// Runtime whose StateKey is new and whose PreviousStateKeys hold the old
// one; the new state it makes is sealed with the new key, which a Runtime
// that has dropped the old key accepts; a key in neither is refused.
func TestStateKeyRotation(t *testing.T) {
	oldKey, newKey := testStateKey, []byte("the next key, 32 bytes or longer")
	opts := suspendOptions(nil)
	opts.StateKey = oldKey
	before := mustNew(t, opts)
	code := `const a = await tools.orders.get({ id: 1 }); const b = await tools.orders.get({ id: 2 }); return a.total + b.total`
	_, s, err := before.ExecuteSuspendable(context.Background(), code)
	if err != nil || s == nil {
		t.Fatal(err)
	}
	opts.StateKey, opts.PreviousStateKeys = newKey, [][]byte{oldKey}
	rotating := mustNew(t, opts)
	_, s2, err := rotating.Resume(context.Background(), s.State, rotating.RunPending(context.Background(), s.Pending[0]))
	if err != nil || s2 == nil {
		t.Fatalf("an old state under rotation: %v", err)
	}
	opts.PreviousStateKeys = nil
	after := mustNew(t, opts)
	if _, err := after.Inspect(s.State); !errors.Is(err, ErrStateInvalid) {
		t.Fatalf("an old state once the old key is dropped: %v", err)
	}
	res, s3, err := after.Resume(context.Background(), s2.State, after.RunPending(context.Background(), s2.Pending[0]))
	if err != nil || s3 != nil || !res.OK {
		t.Fatalf("a state sealed during rotation, after it: %v %s", err, clip(res))
	}
	opts.StateKey, opts.PreviousStateKeys = newKey, [][]byte{[]byte("short")}
	if _, err := New(opts); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("a short previous key: %v", err)
	}
}

// TestSuspendedResultSaysSo: the Result of a suspended run is neither a
// success nor a failure: it says the run is suspended and what it waits
// for, with a policy's question when one asked, and the step that ends
// the run carries no suspension.
func TestSuspendedResultSaysSo(t *testing.T) {
	ctx := context.Background()
	opts := suspendOptions(nil)
	opts.Policy = Rules{Default: Allow, Tools: map[string]Verdict{"orders.refund": Ask}}.Policy()
	rt := mustNew(t, opts)
	res, s, err := rt.ExecuteSuspendable(ctx, `const a = tools.orders.get({ id: 1 }); const b = tools.orders.refund({ id: 1 }); return [await a, await b]`)
	if err != nil || s == nil {
		t.Fatalf("got %v, %v; want a suspension", s, err)
	}
	b, _ := json.Marshal(res)
	var got struct {
		OK        bool            `json:"ok"`
		Error     json.RawMessage `json:"error"`
		Suspended *Suspension     `json:"suspended"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.OK || got.Error != nil || got.Suspended == nil {
		t.Fatalf("got %s, want ok false, no error, and a suspension", b)
	}
	if !reflect.DeepEqual(got.Suspended.Pending, []int{1}) || !strings.HasPrefix(got.Suspended.Reason, "waiting for approval: orders.refund (call 1): ") {
		t.Errorf("got suspension %+v, want call 1 waiting for approval with the policy's question", got.Suspended)
	}
	res, s, err = rt.Resume(ctx, s.State, rt.RunPending(ctx, s.Pending[0]))
	if err != nil || s != nil || !res.OK || res.Suspended != nil {
		t.Errorf("got %+v, %v, %v; want the run ended, without a suspension", res, s, err)
	}
}

// TestStateExactSize: a small run's state is handed out without the room
// its snapshot was written in, so a host that keeps many holds their
// bytes and no more.
func TestStateExactSize(t *testing.T) {
	get := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	rt, err := New(Options{Tools: Tools{"x": Tools{"get": get}}, StateKey: testStateKey})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	_, s, err := rt.ExecuteSuspendable(context.Background(), `const a = await tools.x.get({ id: 1 }); return a`)
	if err != nil || s == nil {
		t.Fatalf("not suspended: %v", err)
	}
	if spare := cap(s.State) - len(s.State); spare > len(s.State)/8 {
		t.Errorf("a state of %d bytes has %d bytes of spare capacity", len(s.State), spare)
	}
}

// TestCompactState: a compacted state is smaller, describes the same
// pending call, and resumes to the same end as the state it came from;
// compacting it again changes nothing; a damaged one, or one sealed
// under another key, is refused.
func TestCompactState(t *testing.T) {
	get := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	opts := Options{Tools: Tools{"x": Tools{"get": get}}, StateKey: testStateKey}
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := context.Background()
	const code = `const rows = Array.from({ length: 500 }, (_, i) => ({ i, s: "row " + i }))
const a = await tools.x.get({ id: 1 })
const b = await tools.x.get({ id: a.id + 1 })
return { a, b, n: rows.length, last: rows[499].s }`
	_, s, err := rt.ExecuteSuspendable(ctx, code)
	if err != nil || s == nil {
		t.Fatalf("not suspended: %v", err)
	}
	compact, err := rt.CompactState(ctx, s.State)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("state %d bytes, compacted %d", len(s.State), len(compact))
	if len(compact) >= len(s.State) || cap(compact)-len(compact) > len(compact)/8 {
		t.Errorf("compacted %d bytes to %d (capacity %d)", len(s.State), len(compact), cap(compact))
	}
	if again, err := rt.CompactState(ctx, compact); err != nil || !bytes.Equal(again, compact) {
		t.Errorf("compacting again: %d bytes, %v", len(again), err)
	}
	in, err := rt.Inspect(compact)
	if err != nil || len(in.Pending) != 1 || string(in.Pending[0].Input) != string(s.Pending[0].Input) {
		t.Fatalf("Inspect: %+v, %v", in, err)
	}
	finish := func(state []byte) string {
		t.Helper()
		p := s.Pending[0]
		_, next, err := rt.Resume(ctx, state, CallResult{Index: p.Index, Output: p.Input})
		if err != nil || next == nil {
			t.Fatalf("first resume: %v", err)
		}
		// The next state is compacted too, on the way.
		c, err := rt.CompactState(ctx, next.State)
		if err != nil {
			t.Fatal(err)
		}
		q := next.Pending[0]
		res, last, err := rt.Resume(ctx, c, CallResult{Index: q.Index, Output: q.Input})
		if err != nil || last != nil || !res.OK {
			t.Fatalf("second resume: %+v, %v, %v", res, last, err)
		}
		return string(res.Value)
	}
	if got, want := finish(compact), finish(s.State); got != want || !strings.Contains(got, `"last":"row 499"`) {
		t.Errorf("compacted: %s; as it was: %s", got, want)
	}

	damaged := bytes.Clone(compact)
	damaged[len(damaged)/2] ^= 1
	if _, err := rt.CompactState(ctx, damaged); !errors.Is(err, ErrStateInvalid) {
		t.Errorf("damaged: %v", err)
	}
	if _, _, err := rt.Resume(ctx, damaged, CallResult{Index: s.Pending[0].Index, Output: s.Pending[0].Input}); !errors.Is(err, ErrStateInvalid) {
		t.Errorf("resuming damaged: %v", err)
	}
	other, err := New(Options{Tools: opts.Tools, StateKey: []byte("another key, 32 bytes long.....!")})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.CompactState(ctx, s.State); !errors.Is(err, ErrStateInvalid) {
		t.Errorf("another key: %v", err)
	}
	// A state sealed under a previous key is compacted under the current
	// one, which alone then opens it.
	newKey := []byte("the next key, also 32 bytes long")
	rotated, err := New(Options{Tools: opts.Tools, StateKey: newKey, PreviousStateKeys: [][]byte{testStateKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer rotated.Close()
	resealed, err := rotated.CompactState(ctx, s.State)
	if err != nil {
		t.Fatal(err)
	}
	onlyNew, err := New(Options{Tools: opts.Tools, StateKey: newKey})
	if err != nil {
		t.Fatal(err)
	}
	defer onlyNew.Close()
	if _, err := onlyNew.Inspect(resealed); err != nil {
		t.Errorf("the resealed state under the new key alone: %v", err)
	}
	if _, err := rt.Inspect(resealed); !errors.Is(err, ErrStateInvalid) {
		t.Errorf("the resealed state under the old key: %v", err)
	}
	none, err := New(Options{Tools: opts.Tools})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if _, err := none.CompactState(ctx, s.State); !errors.Is(err, ErrNoStateKey) {
		t.Errorf("no key: %v", err)
	}
}
