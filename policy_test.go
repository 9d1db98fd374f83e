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

// policyTools: a read, a deletion, and a tool with no annotations.
func policyTools(ran *sync.Map) Tools {
	tool := func(name string, a *Annotations) Tool {
		return Tool{Annotations: a, Run: func(_ context.Context, in json.RawMessage) (any, error) {
			n, _ := ran.LoadOrStore(name, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return map[string]any{"tool": name, "input": in}, nil
		}}
	}
	return Tools{"files": Tools{
		"read":   tool("read", &Annotations{ReadOnly: true}),
		"delete": tool("delete", &Annotations{Destructive: true}),
		"write":  tool("write", nil),
	}}
}

func ranCount(ran *sync.Map, name string) int64 {
	n, ok := ran.Load(name)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

var readAllowDeleteDenyAsk = Rules{ReadOnly: Allow, Destructive: Deny, Default: Ask}

func TestPolicyInExecute(t *testing.T) {
	var ran sync.Map
	var seen []Call
	var mu sync.Mutex
	policy := readAllowDeleteDenyAsk.Policy()
	rt := mustNew(t, Options{Tools: policyTools(&ran), Timeout: 10 * time.Second,
		Policy: func(ctx context.Context, c Call) Decision {
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
			return policy(ctx, c)
		},
		Approve: func(_ context.Context, c Call, question string) Decision {
			var in struct{ Name string }
			_ = json.Unmarshal(c.Input, &in)
			if question != "allow files.write?" {
				return Decision{Verdict: Deny, Reason: "unexpected question " + question}
			}
			if in.Name == "ok.txt" {
				return Decision{Verdict: Allow}
			}
			return Decision{Verdict: Deny, Reason: "not that file"}
		}})
	ctx := WithSession(context.Background(), "session-7")
	res, err := rt.Execute(ctx, `
const settled = await Promise.allSettled([
  tools.files.read({ name: "a.txt" }),
  tools.files.delete({ name: "a.txt" }),
  tools.files.write({ name: "ok.txt" }),
  tools.files.write({ name: "secret.txt" }),
])
let all
try { await Promise.all([tools.files.read({ name: "b" }), tools.files.delete({ name: "b" })]) } catch (e) { all = e.message }
const raced = await Promise.race([tools.files.delete({ name: "c" }).catch((e) => e.kind), new Promise(() => {})])
return { settled: settled.map((s) => s.status === "fulfilled" ? s.value.tool : s.reason.message), all, raced }`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"settled":["read","tools.files.delete was denied: files.delete is not allowed here","write","tools.files.write was denied: not that file"],"all":"tools.files.delete was denied: files.delete is not allowed here","raced":"ToolFailure"}`
	if string(res.Value) != want {
		t.Fatalf("value %s\nwant  %s", res.Value, want)
	}
	var outcomes []string
	for _, c := range res.ToolCalls {
		outcomes = append(outcomes, string(c.Outcome))
	}
	if got := strings.Join(outcomes, ","); got != "ok,denied,ok,denied,ok,denied,denied" {
		t.Fatalf("audit %s", got)
	}
	if ranCount(&ran, "delete") != 0 || ranCount(&ran, "write") != 1 || ranCount(&ran, "read") != 2 {
		t.Fatalf("runs: delete %d, write %d, read %d", ranCount(&ran, "delete"), ranCount(&ran, "write"), ranCount(&ran, "read"))
	}
	if len(seen) != 7 {
		t.Fatalf("the policy saw %d calls", len(seen))
	}
	for i, c := range seen {
		if c.Index != i || c.Session != "session-7" || c.RunID == "" || c.RunID != seen[0].RunID {
			t.Fatalf("call request %d: %+v", i, c)
		}
	}
	if seen[0].Annotations == nil || !seen[0].Annotations.ReadOnly || seen[2].Annotations != nil {
		t.Fatalf("annotations: %+v %+v", seen[0].Annotations, seen[2].Annotations)
	}
}

func TestPolicyWithoutApprover(t *testing.T) {
	var ran sync.Map
	rt := mustNew(t, Options{Tools: policyTools(&ran), Policy: readAllowDeleteDenyAsk.Policy()})
	res, _ := rt.Execute(context.Background(), `return await tools.files.write({ name: "x" })`)
	if res.OK || !strings.Contains(res.Error.Message, "needs approval, and nobody can approve it here") || ranCount(&ran, "write") != 0 {
		t.Fatalf("%s", clip(res))
	}
}

func TestPolicyFailures(t *testing.T) {
	var ran sync.Map
	for name, policy := range map[string]func(context.Context, Call) Decision{
		"panics":     func(context.Context, Call) Decision { panic("boom") },
		"no verdict": func(context.Context, Call) Decision { return Decision{Verdict: 42} },
	} {
		rt := mustNew(t, Options{Tools: policyTools(&ran), Policy: policy})
		res, _ := rt.Execute(context.Background(), `try { await tools.files.read({}) } catch (e) { return e.message }`)
		if !strings.Contains(string(res.Value), "was denied: the host's policy") || ranCount(&ran, "read") != 0 {
			t.Fatalf("%s: %s", name, clip(res))
		}
	}
	// An approver that never answers: the call is denied when the run ends.
	rt := mustNew(t, Options{Tools: policyTools(&ran), Policy: readAllowDeleteDenyAsk.Policy(), Timeout: 200 * time.Millisecond,
		Approve: func(ctx context.Context, _ Call, _ string) Decision {
			<-ctx.Done()
			return Decision{Verdict: Allow}
		}})
	res, _ := rt.Execute(context.Background(), `return await tools.files.write({})`)
	if !errors.Is(res.Err(), TimeoutExceeded) || ranCount(&ran, "write") != 0 {
		t.Fatalf("%s", clip(res))
	}
}

// TestPolicyAskSuspends: in a suspendable run, allowed calls run and asked
// ones wait as pending calls with the question; a new Runtime (as after a
// restart) gets the answer.
func TestPolicyAskSuspends(t *testing.T) {
	var ran sync.Map
	var runIDs []string
	policy := readAllowDeleteDenyAsk.Policy()
	opts := Options{Tools: policyTools(&ran), StateKey: testStateKey, Timeout: 10 * time.Second,
		Policy: func(ctx context.Context, c Call) Decision {
			runIDs = append(runIDs, c.RunID)
			return policy(ctx, c)
		}}
	rt := mustNew(t, opts)
	code := `const a = await tools.files.read({ name: "a" })
let denied
try { await tools.files.delete({ name: "a" }) } catch (e) { denied = e.message }
const w = await Promise.all([tools.files.write({ name: "1" }), tools.files.write({ name: "2" })])
const after = await tools.files.read({ name: "after" })
return [a.tool, denied, w.map((x) => x.tool ?? x), after.tool]`
	res, s, err := rt.ExecuteSuspendable(context.Background(), code)
	if err != nil || s == nil {
		t.Fatalf("not suspended: %v %s", err, clip(res))
	}
	if ranCount(&ran, "read") != 1 || len(s.Pending) != 2 || s.Pending[0].Reason != "allow files.write?" || s.Pending[0].Name != "files.write" {
		t.Fatalf("reads %d, pending %+v", ranCount(&ran, "read"), s.Pending)
	}
	var outcomes []string
	for _, c := range res.ToolCalls {
		outcomes = append(outcomes, string(c.Outcome))
	}
	if strings.Join(outcomes, ",") != "ok,denied,pending,pending" {
		t.Fatalf("audit while suspended: %v", outcomes)
	}
	later := mustNew(t, opts)
	in, err := later.Inspect(s.State)
	if err != nil || in.Pending[1].Reason != "allow files.write?" {
		t.Fatalf("%v %+v", err, in)
	}
	res, s2, err := later.Resume(context.Background(), s.State, later.RunPending(context.Background(), in.Pending[0]),
		CallResult{Index: in.Pending[1].Index, Err: ToolError("refused by the reviewer")})
	if err != nil || s2 != nil || !strings.Contains(res.Error.Message, "refused by the reviewer") {
		// Promise.all rejects with the refusal.
		t.Fatalf("%v %v %s", err, s2, clip(res))
	}
	if ranCount(&ran, "write") != 1 || ranCount(&ran, "delete") != 0 {
		t.Fatalf("write ran %d times, delete %d", ranCount(&ran, "write"), ranCount(&ran, "delete"))
	}
	for _, id := range runIDs {
		if id != s.RunID {
			t.Fatalf("policy saw run ids %v, the run is %s", runIDs, s.RunID)
		}
	}
}

func TestParseRules(t *testing.T) {
	r, err := ParseRules("readonly=allow, destructive=deny,default=ask,orders.*=deny,orders.get=allow")
	if err != nil {
		t.Fatal(err)
	}
	p := r.Policy()
	for name, want := range map[string]Verdict{"orders.get": Allow, "orders.refund": Deny, "files.x": Ask} {
		if got := p(context.Background(), Call{Name: name}).Verdict; got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	if got := p(context.Background(), Call{Name: "files.r", Annotations: &Annotations{ReadOnly: true}}).Verdict; got != Allow {
		t.Errorf("read-only: %v", got)
	}
	for _, bad := range []string{"readonly", "readonly=maybe", "[=allow"} {
		if _, err := ParseRules(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// Hold: a suspendable run waits for the host to make the call, with no
// question; Execute runs it; a transaction's begin is not made a question
// by a held tool.
func TestHoldVerdict(t *testing.T) {
	var ran atomic.Int64
	opts := suspendOptions(&ran)
	opts.Policy = func(_ context.Context, c Call) Decision {
		if c.Name == "orders.refund" {
			return Decision{Verdict: Hold, Reason: "ignored"}
		}
		return Decision{Verdict: Allow}
	}
	rt := mustNew(t, opts)
	ctx := context.Background()
	code := `const o = await tools.orders.get({ id: 1 }); return (await tools.orders.refund({ id: o.id })).refunded.id`
	res, err := rt.Execute(ctx, code)
	if err != nil || !res.OK || string(res.Value) != "1" || ran.Load() != 2 {
		t.Fatalf("Execute: %+v %v (ran %d)", res, err, ran.Load())
	}
	ran.Store(0)
	_, s, err := rt.ExecuteSuspendable(ctx, code)
	if err != nil || s == nil || len(s.Pending) != 1 {
		t.Fatalf("suspendable: %+v %v", s, err)
	}
	if p := s.Pending[0]; p.Name != "orders.refund" || p.Reason != "" || ran.Load() != 1 {
		t.Fatalf("held call %+v (ran %d)", p, ran.Load())
	}
	res, s, err = rt.Resume(ctx, s.State, rt.RunPending(ctx, s.Pending[0]))
	if err != nil || s != nil || string(res.Value) != "1" || ran.Load() != 2 {
		t.Fatalf("resumed: %+v %+v %v", res, s, err)
	}
	if Hold.String() != "hold" {
		t.Fatal(Hold.String())
	}
	if _, err := ParseVerdict("hold"); err == nil {
		t.Fatal("rules can hold")
	}
}

// TestDeniedCallsReachTheHooks: a call the policy denies, and one the
// approver refuses, are reported to the hooks like any other call, start
// and end in pairs, with OutcomeDenied and the message the program saw.
func TestDeniedCallsReachTheHooks(t *testing.T) {
	var mu sync.Mutex
	var starts []string
	ends := map[string]CallEnd{}
	opts := Options{
		Tools:  policyTools(&sync.Map{}),
		Policy: readAllowDeleteDenyAsk.Policy(),
		Approve: func(context.Context, Call, string) Decision {
			return Decision{Verdict: Deny, Reason: "not today"}
		},
		OnToolCallStart: func(_ context.Context, c Call) {
			mu.Lock()
			defer mu.Unlock()
			starts = append(starts, c.Name)
		},
		OnToolCallEnd: func(ctx context.Context, e CallEnd) {
			mu.Lock()
			defer mu.Unlock()
			if c, ok := CallFrom(ctx); !ok || c.Index != e.Index {
				t.Errorf("got a hook context without its call %d", e.Index)
			}
			ends[e.Name] = e
		},
	}
	res, err := Execute(context.Background(), opts, `
		const out = []
		for (const f of [tools.files.read, tools.files.delete, tools.files.write])
			out.push(await f({ path: "/a" }).then(() => "ok", (e) => e.message))
		return out`)
	if err != nil || !res.OK {
		t.Fatalf("got %+v, %v", res, err)
	}
	var seen []string
	_ = json.Unmarshal(res.Value, &seen)
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 3 || len(ends) != 3 {
		t.Fatalf("got starts %q and ends %v, want all three calls reported", starts, ends)
	}
	for i, want := range []struct {
		name    string
		outcome Outcome
	}{{"files.read", OutcomeOK}, {"files.delete", OutcomeDenied}, {"files.write", OutcomeDenied}} {
		e := ends[want.name]
		if e.Outcome != want.outcome || res.ToolCalls[i].Outcome != want.outcome {
			t.Errorf("%s: got hook outcome %q and audit %q, want %q", want.name, e.Outcome, res.ToolCalls[i].Outcome, want.outcome)
		}
		if want.outcome == OutcomeDenied && e.Message != seen[i] {
			t.Errorf("%s: got hook message %q, want the program's %q", want.name, e.Message, seen[i])
		}
	}
	if !strings.Contains(ends["files.write"].Message, "not today") {
		t.Errorf("got %q, want the approver's reason", ends["files.write"].Message)
	}
}
