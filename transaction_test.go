package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// ledger is a fake service whose steps can be undone, recording what
// happened in order.
type ledger struct {
	mu    sync.Mutex
	log   []string
	undid []string // the calls the compensations' contexts name
}

func (l *ledger) note(s string) {
	l.mu.Lock()
	l.log = append(l.log, s)
	l.mu.Unlock()
}

func (l *ledger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.log, ",")
}

func (l *ledger) tools(failStep string, failUndo string) Tools {
	step := func(name string) Tool {
		return Tool{
			Run: func(_ context.Context, in json.RawMessage) (any, error) {
				if name == failStep {
					l.note(name + ":failed")
					return nil, ToolError(name + " refused")
				}
				l.note(name)
				return map[string]string{"receipt": name + "-1"}, nil
			},
			Compensate: func(ctx context.Context, in, out json.RawMessage) error {
				if c, ok := CallFrom(ctx); ok && c.Compensating {
					l.mu.Lock()
					l.undid = append(l.undid, fmt.Sprintf("%s#%d", c.Name, c.Index))
					l.mu.Unlock()
				}
				var o struct{ Receipt string }
				_ = json.Unmarshal(out, &o)
				if name == failUndo {
					l.note("undo " + name + ":failed")
					return ToolError("the " + name + " cannot be reversed any more")
				}
				l.note("undo " + o.Receipt)
				return nil
			},
		}
	}
	return Tools{"shop": Tools{"reserve": step("reserve"), "charge": step("charge"), "ship": step("ship"),
		"email": Tool{Run: func(context.Context, json.RawMessage) (any, error) { l.note("email"); return "sent", nil }}}}
}

const threeSteps = `const { tx } = await tools.$codemode.begin({ touches: ["shop.reserve", "shop.charge", "shop.ship"] })
await tools.shop.reserve({})
await tools.shop.charge({})
await tools.shop.ship({})
await tools.$codemode.commit({ tx })
return "done"`

func TestTransactionRollsBackInReverse(t *testing.T) {
	var l ledger
	rt := mustNew(t, Options{Tools: l.tools("ship", "")})
	res, _ := rt.Execute(context.Background(), threeSteps)
	if res.OK || res.Error.Kind != ToolFailure || !strings.Contains(res.Error.Message, "rolled back (2 of 2 calls undone)") {
		t.Fatalf("%s", clip(res))
	}
	if got := l.String(); got != "reserve,charge,ship:failed,undo charge-1,undo reserve-1" {
		t.Fatalf("ledger %s", got)
	}
	// Each compensation's context names the call it undoes.
	if got := strings.Join(l.undid, ","); got != "shop.charge#2,shop.reserve#1" {
		t.Fatalf("compensations' calls %s", got)
	}
	var audit []string
	for _, c := range res.ToolCalls {
		audit = append(audit, c.Name+"="+string(c.Outcome))
	}
	want := "$codemode.begin=ok,shop.reserve=ok,shop.charge=ok,shop.ship=error,shop.charge#compensate=ok,shop.reserve#compensate=ok"
	if strings.Join(audit, ",") != want {
		t.Fatalf("audit %s", strings.Join(audit, ","))
	}
}

func TestTransactionCompensationFailureIsReported(t *testing.T) {
	var l ledger
	rt := mustNew(t, Options{Tools: l.tools("ship", "reserve")})
	res, _ := rt.Execute(context.Background(), threeSteps)
	if res.OK || !strings.Contains(res.Error.Message, "the rollback is incomplete: shop.reserve was not undone: the reserve cannot be reversed any more") {
		t.Fatalf("%s", clip(res))
	}
	last := res.ToolCalls[len(res.ToolCalls)-1]
	if last.Name != "shop.reserve#compensate" || last.Outcome != OutcomeError {
		t.Fatalf("audit %+v", res.ToolCalls)
	}
	// An explicit rollback reports the same to the program.
	var l2 ledger
	rt2 := mustNew(t, Options{Tools: l2.tools("", "charge")})
	res, _ = rt2.Execute(context.Background(), `const { tx } = await tools.$codemode.begin({ touches: ["shop.reserve", "shop.charge", "shop.email"] })
await tools.shop.reserve({}); await tools.shop.charge({}); await tools.shop.email({})
try { await tools.$codemode.rollback({ tx }) } catch (e) { return e.message }`)
	want := `"the rollback is incomplete: shop.email cannot be undone (it has no compensation); shop.charge was not undone: the charge cannot be reversed any more"`
	if string(res.Value) != want || l2.String() != "reserve,charge,email,undo charge:failed,undo reserve-1" {
		t.Fatalf("value %s\nledger %s", res.Value, l2.String())
	}
}

func TestTransactionRules(t *testing.T) {
	var l ledger
	rt := mustNew(t, Options{Tools: l.tools("", "")})
	res, _ := rt.Execute(context.Background(), `const out = []
const { tx } = await tools.$codemode.begin({ touches: ["shop.reserve"] })
try { await tools.shop.charge({}) } catch (e) { out.push(e.message) }
try { await tools.$codemode.begin({ touches: ["shop.ship"] }) } catch (e) { out.push(e.message) }
try { await tools.$codemode.commit({ tx: 99 }) } catch (e) { out.push(e.message) }
try { await tools.$codemode.begin({ touches: ["shop.nope"] }) } catch (e) { out.push(e.kind) }
out.push((await tools.$codemode.commit({ tx })).committed)
return out`)
	v := string(res.Value)
	for _, want := range []string{"tools.shop.charge is not in the open transaction's touched set (shop.reserve)", "is open already", "pass { tx }", "InvalidToolInput", "0]"} {
		if !strings.Contains(v, want) {
			t.Errorf("%q not in %s", want, v)
		}
	}
	// A good run with a transaction open commits it: nothing is undone.
	res, _ = rt.Execute(context.Background(), `await tools.$codemode.begin({ touches: ["shop.reserve"] }); await tools.shop.reserve({}); return 1`)
	if !res.OK || strings.Contains(l.String(), "undo") {
		t.Fatalf("%s %s", clip(res), l.String())
	}
	// A run that times out with one open rolls it back.
	var l2 ledger
	rt2 := mustNew(t, Options{Tools: l2.tools("", ""), Timeout: 300 * time.Millisecond})
	res, _ = rt2.Execute(context.Background(), `await tools.$codemode.begin({ touches: ["shop.reserve"] }); await tools.shop.reserve({}); for (;;) {}`)
	if !errors.Is(res.Err(), TimeoutExceeded) || l2.String() != "reserve,undo reserve-1" || !strings.Contains(res.Error.Message, "rolled back") {
		t.Fatalf("%s %s", clip(res), l2.String())
	}
}

// TestTransactionCallsJudgedOneByOne: a policy that asks about every
// call is asked about the begin (naming every declared tool) and then
// about each call, with its input, in Execute and in a suspended run
// resumed elsewhere: approving the begin approves no call.
func TestTransactionCallsJudgedOneByOne(t *testing.T) {
	var l ledger
	var asked []string
	opts := Options{Tools: l.tools("", ""), Policy: Rules{Default: Ask}.Policy(), StateKey: testStateKey,
		Approve: func(_ context.Context, c Call, q string) Decision {
			asked = append(asked, c.Name+" "+string(c.Input))
			if c.Name == "$codemode.begin" && !strings.Contains(q, "tools.shop.charge (no annotations") {
				return Decision{Verdict: Deny, Reason: "the question does not name the tools: " + q}
			}
			return Decision{Verdict: Allow}
		}}
	rt := mustNew(t, opts)
	res, _ := rt.Execute(context.Background(), threeSteps)
	want := []string{`$codemode.begin {"touches":["shop.reserve","shop.charge","shop.ship"]}`, "shop.reserve {}", "shop.charge {}", "shop.ship {}"}
	if !res.OK || fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Fatalf("%s asked %q", clip(res), asked)
	}
	res, s, err := rt.ExecuteSuspendable(context.Background(), threeSteps)
	if err != nil || s == nil || len(s.Pending) != 1 || s.Pending[0].Name != "$codemode.begin" {
		t.Fatalf("%v %+v %s", err, s, clip(res))
	}
	steps := 0
	for s != nil && err == nil {
		later := mustNew(t, opts)
		steps++
		res, s, err = later.Resume(context.Background(), s.State, later.RunPending(context.Background(), s.Pending[0]))
	}
	if err != nil || !res.OK || steps != 4 || len(res.ToolCalls) != 5 {
		t.Fatalf("%v %s after %d steps", err, clip(res), steps)
	}
}

// TestTransactionAcrossSuspension: the open transaction travels in the
// state; a failure after resuming rolls back calls answered before.
func TestTransactionAcrossSuspension(t *testing.T) {
	var l ledger
	opts := Options{Tools: l.tools("charge", ""), StateKey: testStateKey}
	rt := mustNew(t, opts)
	res, s, err := rt.ExecuteSuspendable(context.Background(), threeSteps)
	if s == nil {
		t.Fatalf("not suspended: %v %s", err, clip(res))
	}
	for s != nil && err == nil {
		fresh := mustNew(t, opts)
		var rs []CallResult
		for _, p := range s.Pending {
			rs = append(rs, fresh.RunPending(context.Background(), p))
		}
		res, s, err = fresh.Resume(context.Background(), s.State, rs...)
	}
	if err != nil || res.OK || res.Error == nil || !strings.Contains(res.Error.Message, "rolled back (1 of 1 calls undone)") || l.String() != "reserve,charge:failed,undo reserve-1" {
		t.Fatalf("%v %s\nledger %s", err, clip(res), l.String())
	}
}

// slowLedger is a ledger whose steps take a while and may ignore their
// context, and whose compensations may hang.
func slowLedger(l *ledger, stepTakes time.Duration, ignoreCtx bool, undoHangs string) Tools {
	step := func(name string) Tool {
		return Tool{
			Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
				select {
				case <-time.After(stepTakes):
				case <-ctx.Done():
					if !ignoreCtx {
						l.note(name + ":cancelled")
						return nil, ctx.Err()
					}
					time.Sleep(stepTakes)
				}
				l.note(name)
				return map[string]string{"receipt": name}, nil
			},
			Compensate: func(ctx context.Context, _, _ json.RawMessage) error {
				if name == undoHangs {
					select {} // ignores its context for good
				}
				l.note("undo " + name)
				return nil
			},
		}
	}
	return Tools{"shop": Tools{"reserve": step("reserve"), "charge": step("charge"), "ship": step("ship")}}
}

// TestCompensationIsBounded: a compensation that ignores its context is
// abandoned after CompensationGrace and reported, never waited for
// forever, and the others still run.
func TestCompensationIsBounded(t *testing.T) {
	var l ledger
	rt := mustNew(t, Options{Tools: slowLedger(&l, 0, false, "charge"), Timeout: time.Second, CompensationGrace: 200 * time.Millisecond})
	done := make(chan Result, 1)
	go func() {
		res, _ := rt.Execute(context.Background(), `await tools.$codemode.begin({ touches: ["shop.reserve", "shop.charge"] })
await tools.shop.reserve({}); await tools.shop.charge({}); for (;;) {}`)
		done <- res
	}()
	var res Result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Execute waits for a compensation that never returns")
	}
	if !errors.Is(res.Err(), TimeoutExceeded) || l.String() != "reserve,charge,undo reserve" ||
		!strings.Contains(res.Error.Message, "shop.charge was not undone: its compensation did not finish within 200ms and was abandoned") ||
		!strings.Contains(res.Error.Message, "(1 of 2 calls undone)") {
		t.Fatalf("%s\nledger %s", clip(res), l.String())
	}
	// An explicit rollback is bounded the same way, and the program hears.
	var l2 ledger
	rt2 := mustNew(t, Options{Tools: slowLedger(&l2, 0, false, "reserve"), CompensationGrace: 100 * time.Millisecond})
	res, _ = rt2.Execute(context.Background(), `const { tx } = await tools.$codemode.begin({ touches: ["shop.reserve", "shop.charge"] })
await tools.shop.reserve({}); await tools.shop.charge({})
try { await tools.$codemode.rollback({ tx }) } catch (e) { return e.message }`)
	if !strings.Contains(string(res.Value), "shop.reserve was not undone: its compensation did not finish") || l2.String() != "reserve,charge,undo charge" {
		t.Fatalf("%s\nledger %s", clip(res), l2.String())
	}
}

// TestRollbackCoversCallsInFlight: a call started without await and then
// rolled back is waited for and undone; a run that fails while calls of
// its transaction run waits for them within the grace, records how they
// ended and undoes those that completed.
func TestRollbackCoversCallsInFlight(t *testing.T) {
	var l ledger
	rt := mustNew(t, Options{Tools: slowLedger(&l, 100*time.Millisecond, false, "")})
	res, _ := rt.Execute(context.Background(), `const { tx } = await tools.$codemode.begin({ touches: ["shop.reserve", "shop.charge"] })
await tools.shop.reserve({})
const charge = tools.shop.charge({})
const r = await tools.$codemode.rollback({ tx })
return [r, await charge]`)
	if string(res.Value) != `[{"rolledBack":["shop.charge","shop.reserve"]},{"receipt":"charge"}]` || l.String() != "reserve,charge,undo charge,undo reserve" {
		t.Fatalf("%s\nledger %s", clip(res), l.String())
	}
	for round := range 3 {
		// Calls that ignore their context finish after the run failed:
		// the audit says they ran, and they are undone.
		var l2 ledger
		rt2 := mustNew(t, Options{Tools: slowLedger(&l2, 100*time.Millisecond, true, ""), CompensationGrace: 5 * time.Second})
		res, _ = rt2.Execute(context.Background(), `await tools.$codemode.begin({ touches: ["shop.reserve", "shop.charge"] })
tools.shop.reserve({}); tools.shop.charge({})
await new Promise((r) => setTimeout(r, 10))
throw new Error("changed my mind")`)
		var audit []string
		for _, c := range res.ToolCalls {
			audit = append(audit, c.Name+"="+string(c.Outcome))
		}
		got := strings.Join(audit, ",")
		if res.OK || !strings.Contains(got, "shop.reserve=ok") || !strings.Contains(got, "shop.charge=ok") ||
			!strings.Contains(got, "shop.reserve#compensate=ok") || !strings.Contains(got, "shop.charge#compensate=ok") ||
			!strings.Contains(res.Error.Message, "(2 of 2 calls undone)") {
			t.Fatalf("round %d: audit %s\n%s\nledger %s", round, got, clip(res), l2.String())
		}
	}
	// Calls that stop when told: cancelled, and nothing to undo.
	var l3 ledger
	rt3 := mustNew(t, Options{Tools: slowLedger(&l3, time.Minute, false, "")})
	res, _ = rt3.Execute(context.Background(), `await tools.$codemode.begin({ touches: ["shop.charge"] })
tools.shop.charge({})
await new Promise((r) => setTimeout(r, 10))
throw new Error("stop")`)
	if res.ToolCalls[1].Outcome != OutcomeCancelled || !strings.Contains(res.Error.Message, "(0 of 0 calls undone)") || l3.String() != "charge:cancelled" {
		t.Fatalf("%s\nledger %s", clip(res), l3.String())
	}
	// A call that outlives the grace is reported as unknown.
	var l4 ledger
	rt4 := mustNew(t, Options{Tools: slowLedger(&l4, time.Minute, true, ""), CompensationGrace: 100 * time.Millisecond})
	res, _ = rt4.Execute(context.Background(), `await tools.$codemode.begin({ touches: ["shop.charge"] })
tools.shop.charge({})
await new Promise((r) => setTimeout(r, 10))
throw new Error("stop")`)
	if !strings.Contains(res.Error.Message, "1 of its calls was still running after 100ms, so whether it took effect is unknown") {
		t.Fatalf("%s", clip(res))
	}
}

// TestRollbackWithCallsPending: in a suspendable run, a call of a
// transaction rolled back while the call was pending is undone when its
// result arrives, in another Runtime.
func TestRollbackWithCallsPending(t *testing.T) {
	var l ledger
	opts := Options{Tools: l.tools("", ""), StateKey: testStateKey}
	rt := mustNew(t, opts)
	res, s, err := rt.ExecuteSuspendable(context.Background(), `const { tx } = await tools.$codemode.begin({ touches: ["shop.reserve"] })
const p = tools.shop.reserve({})
const r = await tools.$codemode.rollback({ tx })
return [r, await p]`)
	if err != nil || s == nil || len(s.Pending) != 1 {
		t.Fatalf("%v %s", err, clip(res))
	}
	later := mustNew(t, opts)
	res, s, err = later.Resume(context.Background(), s.State, later.RunPending(context.Background(), s.Pending[0]))
	if err != nil || s != nil || !res.OK || l.String() != "reserve,undo reserve-1" {
		t.Fatalf("%v %s\nledger %s", err, clip(res), l.String())
	}
	if last := res.ToolCalls[len(res.ToolCalls)-1]; last.Name != "shop.reserve#compensate" || last.Outcome != OutcomeOK {
		t.Fatalf("audit %+v", res.ToolCalls)
	}
}
