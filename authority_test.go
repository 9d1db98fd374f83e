package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Attacks on the promises of policies, approvals and transactions: a
// deny is never overridden, and a person approves exactly what runs.

// bank is a service with a refund (destructive, compensable), a transfer
// (no annotations) and a lookup (read-only); it counts what really ran.
type bank struct {
	refunds, transfers, lookups, undone atomic.Int64
	mu                                  sync.Mutex
	inputs                              []string
}

func (b *bank) tools() Tools {
	note := func(in json.RawMessage) {
		b.mu.Lock()
		b.inputs = append(b.inputs, string(in))
		b.mu.Unlock()
	}
	return Tools{"shop": Tools{
		"refundOrder": Tool{Annotations: &Annotations{Destructive: true},
			Run: func(_ context.Context, in json.RawMessage) (any, error) {
				note(in)
				b.refunds.Add(1)
				return map[string]string{"refunded": "yes"}, nil
			},
			Compensate: func(context.Context, json.RawMessage, json.RawMessage) error { b.undone.Add(1); return nil }},
		"transfer": Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) {
			note(in)
			b.transfers.Add(1)
			return "sent", nil
		}, Compensate: func(context.Context, json.RawMessage, json.RawMessage) error { b.undone.Add(1); return nil }},
		"lookup": Tool{Annotations: &Annotations{ReadOnly: true}, Run: func(context.Context, json.RawMessage) (any, error) {
			b.lookups.Add(1)
			return "found", nil
		}},
	}}
}

func mustRules(t *testing.T, s string) Rules {
	t.Helper()
	r, err := ParseRules(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDenyIsNeverOverridden: whatever the program wraps a denied call in
// — a transaction declaring it, one declaring something else, Promise
// combinators, a caught begin, a rollback, calls made before the begin
// settles — the call does not run, in Execute and in suspendable runs.
func TestDenyIsNeverOverridden(t *testing.T) {
	programs := map[string]string{
		"begin declaring it": `const { tx } = await tools.$codemode.begin({ touches: ["shop.refundOrder"] })
await tools.shop.refundOrder({ orderId: "o-1" })`,
		"caught begin, then the call": `try { await tools.$codemode.begin({ touches: ["shop.refundOrder"] }) } catch {}
await tools.shop.refundOrder({ orderId: "o-1" })`,
		"begin not awaited": `const b = tools.$codemode.begin({ touches: ["shop.refundOrder", "shop.lookup"] })
const r = tools.shop.refundOrder({ orderId: "o-1" })
await Promise.allSettled([b, r]); await r`,
		"begin declaring an allowed tool twice and it": `const { tx } = await tools.$codemode.begin({ touches: ["shop.lookup", "shop.lookup", "shop.refundOrder"] })
await tools.shop.refundOrder({})`,
		"in a transaction of allowed tools": `const { tx } = await tools.$codemode.begin({ touches: ["shop.lookup"] })
await tools.shop.refundOrder({})`,
		"after a rollback": `const { tx } = await tools.$codemode.begin({ touches: ["shop.lookup"] })
await tools.$codemode.rollback({ tx })
await tools.shop.refundOrder({})`,
		"in parallel with the begin": `await Promise.all([tools.$codemode.begin({ touches: ["shop.refundOrder"] }), tools.shop.refundOrder({}), tools.shop.refundOrder({})])`,
		"by a computed path":         `const k = ["refund", "Order"].join(""); await tools["shop"][k]({})`,
		"race":                       `await Promise.race([tools.shop.refundOrder({}), tools.$codemode.begin({ touches: ["shop.refundOrder"] })])`,
	}
	for _, rules := range []string{"shop.refundOrder=deny,default=allow", "destructive=deny,default=allow", "destructive=deny,default=ask", "shop.*=deny,shop.lookup=allow,*.refund*=allow"} {
		for name, code := range programs {
			for _, mode := range []string{"execute", "suspendable"} {
				t.Run(rules+"/"+name+"/"+mode, func(t *testing.T) {
					var b bank
					opts := Options{Tools: b.tools(), Policy: mustRules(t, rules).Policy(), StateKey: testStateKey,
						Approve: func(context.Context, Call, string) Decision { return Decision{Verdict: Allow} }}
					rt := mustNew(t, opts)
					var res Result
					if mode == "execute" {
						res, _ = rt.Execute(context.Background(), code)
					} else {
						var s *Suspended
						var err error
						res, s, err = rt.ExecuteSuspendable(context.Background(), code)
						// Approve everything that is asked, for as long as the run asks.
						for i := 0; s != nil && err == nil && i < 10; i++ {
							var rs []CallResult
							for _, p := range s.Pending {
								if p.Name == "shop.refundOrder" {
									t.Fatalf("a denied call is pending: %+v", p)
								}
								rs = append(rs, rt.RunPending(context.Background(), p))
							}
							res, s, err = rt.Resume(context.Background(), s.State, rs...)
						}
					}
					if n := b.refunds.Load(); n != 0 {
						t.Fatalf("the denied refund ran %d times: %s", n, clip(res))
					}
					for _, c := range res.ToolCalls {
						if c.Name == "shop.refundOrder" && c.Outcome == OutcomeOK {
							t.Fatalf("audit says a denied call ran: %s", clip(res))
						}
					}
				})
			}
		}
	}
}

// TestBeginIsJudgedByItsTools: a begin declaring a denied tool is
// denied; one declaring a tool asked about is a question naming every
// declared tool with its annotations; the policy sees each declared tool
// (Declared, no input); and approving the begin approves no call.
func TestBeginIsJudgedByItsTools(t *testing.T) {
	var b bank
	var seen []Call
	var mu sync.Mutex
	rules := mustRules(t, "readonly=allow,default=ask").Policy()
	var questions []string
	rt := mustNew(t, Options{Tools: b.tools(), StateKey: testStateKey,
		Policy: func(ctx context.Context, c Call) Decision {
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
			return rules(ctx, c)
		},
		Approve: func(_ context.Context, c Call, q string) Decision {
			questions = append(questions, q)
			if c.Name == "$codemode.begin" {
				return Decision{Verdict: Allow}
			}
			return Decision{Verdict: Deny, Reason: "no"}
		}})
	res, _ := rt.Execute(context.Background(), `const { tx } = await tools.$codemode.begin({ touches: ["shop.lookup", "shop.transfer", "shop.refundOrder"] })
await tools.shop.lookup({})
try { await tools.shop.transfer({ to: "x" }) } catch (e) { return e.message }`)
	if string(res.Value) != `"tools.shop.transfer was denied: no"` || b.transfers.Load() != 0 || b.lookups.Load() != 1 {
		t.Fatalf("%s", clip(res))
	}
	if len(questions) != 2 {
		t.Fatalf("questions %q", questions)
	}
	for _, want := range []string{"tools.shop.lookup (readonly)", "tools.shop.transfer (no annotations: it may change anything): allow shop.transfer?", "tools.shop.refundOrder (destructive): allow shop.refundOrder?"} {
		if !strings.Contains(questions[0], want) {
			t.Errorf("the begin's question lacks %q:\n%s", want, questions[0])
		}
	}
	var declared []string
	for _, c := range seen[:3] {
		if !c.Declared || c.Input != nil {
			t.Fatalf("declared tool request %+v", c)
		}
		declared = append(declared, c.Name)
	}
	if fmt.Sprint(declared) != "[shop.lookup shop.transfer shop.refundOrder]" || seen[3].Declared || seen[4].Name != "shop.transfer" || string(seen[4].Input) != `{"to":"x"}` {
		t.Fatalf("the policy saw %+v", seen)
	}

	// A policy that allows the declared tools but denies the call by its
	// input still denies it inside the transaction.
	byInput := func(_ context.Context, c Call) Decision {
		var in struct{ Amount int }
		_ = json.Unmarshal(c.Input, &in)
		if in.Amount > 100 {
			return Decision{Verdict: Deny, Reason: "too much"}
		}
		return Decision{Verdict: Allow}
	}
	rt2 := mustNew(t, Options{Tools: b.tools(), Policy: byInput})
	res, _ = rt2.Execute(context.Background(), `await tools.$codemode.begin({ touches: ["shop.transfer"] })
await tools.shop.transfer({ amount: 5 })
await tools.shop.transfer({ amount: 500 })`)
	if res.OK || !strings.Contains(res.Error.Message, "too much") || b.transfers.Load() != 1 || b.undone.Load() != 1 {
		t.Fatalf("%s transfers %d undone %d", clip(res), b.transfers.Load(), b.undone.Load())
	}
}

// TestZeroVerdictDenies: a policy that forgets to decide, the zero Rules
// and rules that are not valid grant nothing.
func TestZeroVerdictDenies(t *testing.T) {
	for name, policy := range map[string]func(context.Context, Call) Decision{
		"Decision{}":       func(context.Context, Call) Decision { return Decision{} },
		"Rules{}":          Rules{}.Policy(),
		"bad pattern":      Rules{Default: Allow, Tools: map[string]Verdict{"shop..x": Deny}}.Policy(),
		"unset tool rule":  Rules{Default: Allow, Tools: map[string]Verdict{"shop.transfer": Unset}}.Policy(),
		"verdict too high": func(context.Context, Call) Decision { return Decision{Verdict: Hold + 1} },
	} {
		t.Run(name, func(t *testing.T) {
			var b bank
			rt := mustNew(t, Options{Tools: b.tools(), Policy: policy})
			res, _ := rt.Execute(context.Background(), `try { await tools.shop.lookup({}) } catch (e) { return e.message }`)
			if b.lookups.Load() != 0 || !strings.Contains(string(res.Value), "was denied") {
				t.Fatalf("%s", clip(res))
			}
		})
	}
}

// TestRulesMeanWhatTheySay: Default covers every class not named, a
// class left out takes Default, a tool claiming read-only and destructive
// is judged by the stricter, and ParseRules refuses what it does not
// understand.
func TestRulesMeanWhatTheySay(t *testing.T) {
	ro, de, both := &Annotations{ReadOnly: true}, &Annotations{Destructive: true}, &Annotations{ReadOnly: true, Destructive: true}
	for _, c := range []struct {
		rules string
		a     *Annotations
		want  Verdict
	}{
		{"default=ask", de, Ask},
		{"default=ask", ro, Ask},
		{"default=ask", nil, Ask},
		{"readonly=allow,default=ask", de, Ask},
		{"readonly=allow,default=ask", ro, Allow},
		{"readonly=allow", nil, Deny},
		{"readonly=allow", de, Deny},
		{"readonly=allow,destructive=deny,default=allow", both, Deny},
		{"readonly=allow,destructive=ask,default=allow", both, Ask},
		{"readonly=allow,default=allow", both, Allow},
		{"", nil, Deny},
	} {
		r := mustRules(t, c.rules)
		if got := r.Policy()(context.Background(), Call{Name: "ns.t", Path: []string{"ns", "t"}, Annotations: c.a}).Verdict; got != c.want {
			t.Errorf("%q on %+v: %v, want %v", c.rules, c.a, got, c.want)
		}
	}
	for _, bad := range []string{
		"readonly=allow,destructve=deny,default=ask", // a misspelt class
		"Default=ask", "*=deny", "refund=deny",
		"readonly=allow,readonly=deny", // given twice
		"shop..x=deny", `shop["a=deny`, "default=maybe", "default",
	} {
		if _, err := ParseRules(bad); err == nil {
			t.Errorf("ParseRules(%q) accepted it", bad)
		}
	}
	if _, err := ParseRules("readonly=allow,destructve=deny"); err == nil || !strings.Contains(err.Error(), "did you mean destructive?") {
		t.Errorf("no suggestion: %v", err)
	}
}

// TestRuleMatchingAndPrecedence: patterns match segment by segment (a
// tool name is one segment, whatever it holds), the most specific
// patterns decide, and among equally or incomparably specific ones the
// strictest verdict wins.
func TestRuleMatchingAndPrecedence(t *testing.T) {
	for _, c := range []struct {
		rules string
		path  []string
		want  Verdict
	}{
		{"evil.*=deny,default=allow", []string{"evil", "refund"}, Deny},
		{"evil.*=deny,default=allow", []string{"evil", "a/b"}, Deny},
		{"evil.*=deny,default=allow", []string{"evil", "x.y"}, Deny},
		{"evil.*=deny,default=allow", []string{"evilx", "y"}, Allow},
		{`evil["a/*"]=deny,default=allow`, []string{"evil", "a/b"}, Deny},
		{`files["v1.get"]=deny,default=allow`, []string{"files", "v1.get"}, Deny},
		{"shop.*=deny,*.get*=allow,default=allow", []string{"shop", "getCustomer"}, Deny},
		{"shop.*=allow,*.delete*=deny,default=allow", []string{"shop", "deleteAll"}, Deny},
		{"shop.*=deny,shop.get*=allow,default=deny", []string{"shop", "getCustomer"}, Allow},
		{"shop.*=deny,shop.getCustomer=allow,default=deny", []string{"shop", "getCustomer"}, Allow},
		{"shop.*=allow,shop.getCustomer=deny,default=allow", []string{"shop", "getCustomer"}, Deny},
		{"shop.*=ask,*.*=allow,default=deny", []string{"shop", "x"}, Ask},
		{"shop.*=allow,*.*=ask,default=deny", []string{"shop", "x"}, Allow},
		{"shop.get*=allow,shop.g*=deny,default=allow", []string{"shop", "getX"}, Deny}, // not provably more specific: the deny stands
		{"shop.*=ask,*.get*=allow,default=allow", []string{"shop", "getX"}, Ask},
	} {
		r := mustRules(t, c.rules)
		if got := r.Policy()(context.Background(), Call{Name: strings.Join(c.path, "."), Path: c.path}).Verdict; got != c.want {
			t.Errorf("%q on %q: %v, want %v", c.rules, c.path, got, c.want)
		}
	}
	// A pattern that matches no tool is reported, so a typo is seen.
	var b bank
	rt := mustNew(t, Options{Tools: b.tools()})
	r := mustRules(t, "shop.refundOrdr=deny,shop.*=ask,bank.*=deny,default=allow")
	if got := r.Unmatched(rt); !slices.Equal(got, []string{"bank.*", "shop.refundOrdr"}) {
		t.Fatalf("unmatched %q", got)
	}
}

// TestApprovalShowsExactlyWhatRuns: the approver and the pending call see
// the whole input as canonical JSON — padding cannot push a field out of
// sight, key order cannot bury it, invisible and bidirectional characters
// are escaped — and an input too large to show is denied, with a reason
// the program can read.
func TestApprovalShowsExactlyWhatRuns(t *testing.T) {
	var b bank
	var shown []string
	rt := mustNew(t, Options{Tools: b.tools(), Policy: mustRules(t, "default=ask").Policy(), StateKey: testStateKey,
		Approve: func(_ context.Context, c Call, _ string) Decision {
			shown = append(shown, string(c.Shown()))
			return Decision{Verdict: Allow}
		}})
	code := `return await tools.shop.transfer({ aaaa: "x".repeat(3000), amount: 10, to: "attacker-iban\u202e", note: "a\u200bb", z: { b: 1, a: [2, "\u0000"] } })`
	res, _ := rt.Execute(context.Background(), code)
	want := `{"aaaa":"` + strings.Repeat("x", 3000) + `","amount":10,"note":"a\u200bb","to":"attacker-iban\u202e","z":{"a":[2,"\u0000"],"b":1}}`
	if !res.OK || len(shown) != 1 || shown[0] != want {
		t.Fatalf("%s\nshown %.200q", clip(res), shown)
	}
	// What ran is the same value.
	var ran, saw any
	_ = json.Unmarshal([]byte(b.inputs[0]), &ran)
	_ = json.Unmarshal([]byte(shown[0]), &saw)
	if fmt.Sprint(ran) != fmt.Sprint(saw) {
		t.Fatalf("ran %v, approved %v", ran, saw)
	}
	// The same in a suspendable run: the question is about the input the
	// call will run with.
	_, s, err := rt.ExecuteSuspendable(context.Background(), code)
	if err != nil || s == nil {
		t.Fatal(err)
	}
	if canon, _ := canonicalJSON(s.Pending[0].Input); string(canon) != want {
		t.Fatalf("pending input shown as %.200s", canon)
	}
	// Too large to show: denied before anyone is asked.
	shown = nil
	res, _ = rt.Execute(context.Background(), `try { await tools.shop.transfer({ to: "x", pad: "y".repeat(10000) }) } catch (e) { return e.message }`)
	if !strings.Contains(string(res.Value), "more than the 8192 a person can be asked to approve") || len(shown) != 0 || b.transfers.Load() != 1 {
		t.Fatalf("%s asked %d", clip(res), len(shown))
	}
	res, s, _ = rt.ExecuteSuspendable(context.Background(), `try { await tools.shop.transfer({ pad: "y".repeat(10000) }) } catch (e) { return e.message }`)
	if s != nil || !strings.Contains(string(res.Value), "a person can be asked to approve") {
		t.Fatalf("%s %+v", clip(res), s)
	}
	// Characters past U+FFFF that hide are written as surrogate pairs.
	c, err := canonicalJSON(json.RawMessage(`{"t":"\udb40\udc41x","n":12345678901234567890,"s":"é"}`))
	if err != nil || string(c) != `{"n":12345678901234567890,"s":"é","t":"\udb40\udc41x"}` {
		t.Fatalf("%s %v", c, err)
	}
	for _, bad := range []string{`{"a":1} {"b":2}`, `{`, ``} {
		if _, err := canonicalJSON(json.RawMessage(bad)); err == nil {
			t.Errorf("canonicalJSON(%q) accepted it", bad)
		}
	}
}

// TestDeadlineHoldsForLateAnswers: a result delivered after a run's
// deadline is recorded for what it was; a call whose run is out of time
// is not made; and calls made in a transaction the late answer finds
// open are undone, with nothing reported as cancelled that ran.
func TestDeadlineHoldsForLateAnswers(t *testing.T) {
	var b bank
	opts := Options{Tools: b.tools(), StateKey: testStateKey, Timeout: 300 * time.Millisecond, TimeoutIncludesSuspended: true}
	rt := mustNew(t, opts)
	_, s, err := rt.ExecuteSuspendable(context.Background(), `await tools.$codemode.begin({ touches: ["shop.transfer"] })
await tools.shop.transfer({ to: "a" })
await tools.shop.transfer({ to: "b" })
return "done"`)
	if err != nil || s == nil {
		t.Fatal(err)
	}
	first := rt.RunPending(context.Background(), s.Pending[0])
	res, s, err := rt.Resume(context.Background(), s.State, first)
	if err != nil || s == nil || b.transfers.Load() != 1 {
		t.Fatalf("%v %s", err, clip(res))
	}
	time.Sleep(time.Until(s.Deadline) + 20*time.Millisecond)
	second := rt.RunPending(context.Background(), s.Pending[0])
	if !errors.Is(second.Err, ErrOutOfTime) || b.transfers.Load() != 1 {
		t.Fatalf("a call after the deadline was made: %+v", second)
	}
	res, s2, err := rt.Resume(context.Background(), s.State, second)
	if err != nil || s2 != nil || !errors.Is(res.Err(), TimeoutExceeded) {
		t.Fatalf("%v %s", err, clip(res))
	}
	var audit []string
	for _, c := range res.ToolCalls {
		audit = append(audit, c.Name+"="+string(c.Outcome))
	}
	if got := strings.Join(audit, ","); got != "$codemode.begin=ok,shop.transfer=ok,shop.transfer=cancelled,shop.transfer#compensate=ok" ||
		!strings.Contains(res.Error.Message, "rolled back (1 of 1 calls undone)") || b.undone.Load() != 1 {
		t.Fatalf("audit %s\n%s", got, clip(res))
	}
}

// TestHostileSessionPrograms: programs that try every shape of call to
// get a denied or unapproved call through the session features. The
// invariant is the same for each: the denied refund and the transfer
// nobody approved never run, the run ends with a Result, and the process
// stays healthy.
func TestHostileSessionPrograms(t *testing.T) {
	var b bank
	rt := mustNew(t, Options{Tools: b.tools(), Timeout: 10 * time.Second, StateKey: testStateKey,
		Policy: mustRules(t, "shop.refundOrder=deny,shop.transfer=ask,default=allow").Policy(),
		Approve: func(context.Context, Call, string) Decision {
			return Decision{} // a forgotten answer grants nothing either
		}})
	for name, code := range map[string]string{
		"20k declared tools": `const t = Array(20000).fill("shop.lookup"); t.push("shop.refundOrder")
await tools.$codemode.begin({ touches: t }); return await tools.shop.refundOrder({})`,
		"touches as a string":   `await tools.$codemode.begin({ touches: "shop.refundOrder" }); return await tools.shop.refundOrder({})`,
		"touches via __proto__": `await tools.$codemode.begin(JSON.parse('{"__proto__": {"touches": ["shop.refundOrder"]}}')); return await tools.shop.refundOrder({})`,
		"forged tx ids": `for (const tx of [0, -1, "0", null, 1e308, { valueOf() { return 0 } }]) { try { await tools.$codemode.commit({ tx }) } catch {} try { await tools.$codemode.rollback({ tx }) } catch {} }
return await tools.shop.refundOrder({})`,
		"begin inside begin": `await tools.$codemode.begin({ touches: ["shop.lookup"] }); await tools.$codemode.begin({ touches: ["shop.refundOrder"] }); return await tools.shop.refundOrder({})`,
		"call, apply, bind":  `const f = tools.shop.refundOrder; await Promise.allSettled([f.call(null, {}), Reflect.apply(f, tools, [{}]), f.bind(null)({})]); return await f({})`,
		"computed built-ins": `const c = tools["$code" + "mode"]; await c["be" + "gin"]({ touches: ["shop.refundOrder"] }); return await tools.shop[{ toString() { return "refundOrder" } }]({})`,
		"200 begins at once": `await Promise.allSettled(Array.from({ length: 200 }, () => tools.$codemode.begin({ touches: ["shop.refundOrder", "shop.transfer"] }))); return await tools.shop.transfer({ to: "x" })`,
		"rollback loop":      `for (let i = 0; i < 50; i++) { const { tx } = await tools.$codemode.begin({ touches: ["shop.lookup"] }); await tools.shop.lookup({}); await tools.$codemode.rollback({ tx }) } return await tools.shop.transfer({ to: "x" })`,
		"padded transfer":    `return await tools.shop.transfer({ a: " ".repeat(8150), to: "attacker-iban" })`,
		"transfer in a transaction": `const { tx } = await tools.$codemode.begin({ touches: ["shop.transfer"] }).catch(() => ({}))
return await tools.shop.transfer({ to: "x" })`,
		"unawaited then throw": `tools.shop.transfer({ to: "x" }); tools.shop.refundOrder({}); throw new Error("bye")`,
	} {
		for _, mode := range []string{"execute", "suspendable"} {
			var res Result
			if mode == "execute" {
				res, _ = rt.Execute(context.Background(), code)
			} else {
				var s *Suspended
				res, s, _ = rt.ExecuteSuspendable(context.Background(), code)
				// Deny whatever is asked, as the person would.
				for i := 0; s != nil && i < 5; i++ {
					var rs []CallResult
					for _, p := range s.Pending {
						rs = append(rs, CallResult{Index: p.Index, Denied: "no"})
					}
					res, s, _ = rt.Resume(context.Background(), s.State, rs...)
				}
			}
			if b.refunds.Load() != 0 || b.transfers.Load() != 0 {
				t.Fatalf("%s (%s): refunds %d, transfers %d\n%s", name, mode, b.refunds.Load(), b.transfers.Load(), clip(res))
			}
			if res.OK && !strings.Contains(string(res.Value), "denied") {
				t.Errorf("%s (%s): a result that says nothing was refused: %s", name, mode, clip(res))
			}
		}
	}
}
