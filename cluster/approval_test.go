package cluster

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/nats-io/nats.go"
)

// askCharge asks about every charge and allows the rest.
func askCharge(_ context.Context, c codemode.Call) codemode.Decision {
	if c.Name == "shop.charge" {
		return codemode.Decision{Verdict: codemode.Ask, Reason: "Charge this order?"}
	}
	return codemode.Decision{Verdict: codemode.Allow}
}

func startAskingWorker(t *testing.T, n *Node, fx *effects) {
	t.Helper()
	runWorker(t, n, codemode.Options{Tools: shopTools(fx, nil), Timeout: 30 * time.Second, Policy: askCharge}, WorkerOptions{})
}

const chargeProgram = `
	let r;
	try { r = (await tools.shop.charge({ order: "o-7" })).charged; } catch (e) { r = e.message; }
	return r;`

// A run asks on one front; that front goes away; another answers, and any
// worker finishes the run. The question shows the whole input.
func TestApprovalAcrossFronts(t *testing.T) {
	n := openNode(t, Config{})
	var fx effects
	startAskingWorker(t, n, &fx)
	a := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}})
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := a.Submit(ctx, rt, chargeProgram)
	if err != nil {
		t.Fatal(err)
	}
	_, asked, err := a.Wait(ctx, id)
	if err != nil || asked == nil || len(asked.Calls) != 1 {
		t.Fatalf("asked %+v %v", asked, err)
	}
	q := asked.Calls[0]
	if q.Name != "shop.charge" || q.Reason != "Charge this order?" || string(q.Shown()) != `{"order":"o-7"}` || fx.total() != 0 {
		t.Fatalf("question %+v %s (charges %d)", q, q.Shown(), fx.total())
	}
	// The parked run's state is kept compacted (its snapshot comes first
	// in the state, under the compacted magic), and resumes from there.
	if rec, _, err := n.record(ctx, id); err != nil || rec.Status != parked || !bytes.HasPrefix(rec.State, []byte("CMQJSNZ1")) {
		t.Fatalf("the parked record: %v, status %v, state begins %q", err, rec.Status, rec.State[:min(8, len(rec.State))])
	}
	a.Close() // the front that asked is gone
	b := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}})
	_, again, err := b.Wait(ctx, id)
	if err != nil || again == nil || again.Step != asked.Step {
		t.Fatalf("the other front sees %+v %v", again, err)
	}
	if err := b.Answer(ctx, id, asked.Step, map[int]codemode.Decision{q.Index: {Verdict: codemode.Allow}}); err != nil {
		t.Fatal(err)
	}
	res, _, err := b.Wait(ctx, id)
	if err != nil || !res.OK || string(res.Value) != "true" || fx.total() != 1 {
		t.Fatalf("after the answer: %+v %v (charges %d)", res, err, fx.total())
	}
	if err := b.Answer(ctx, id, asked.Step, map[int]codemode.Decision{q.Index: {Verdict: codemode.Allow}}); !errors.Is(err, ErrAnswered) {
		t.Fatalf("an answer after the run ended: %v", err)
	}
}

// Of many answers to one question at once, one is taken, and the run
// does what that one said.
func TestConcurrentAnswersOneWinner(t *testing.T) {
	n := openNode(t, Config{})
	var fx effects
	startAskingWorker(t, n, &fx)
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 3 {
		id, err := n.Submit(ctx, rt, chargeProgram)
		if err != nil {
			t.Fatal(err)
		}
		_, asked, err := n.Wait(ctx, id)
		if err != nil || asked == nil {
			t.Fatal(asked, err)
		}
		var wins atomic.Int64
		var winner atomic.Value
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				f := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}})
				d := codemode.Decision{Verdict: codemode.Allow}
				if i%2 == 1 {
					d = codemode.Decision{Verdict: codemode.Deny, Reason: "front " + string(rune('0'+i)) + " said no"}
				}
				err := f.Answer(ctx, id, asked.Step, map[int]codemode.Decision{asked.Calls[0].Index: d})
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(d)
				case !errors.Is(err, ErrAnswered):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d answers taken", round, wins.Load())
		}
		res, _, err := n.Wait(ctx, id)
		if err != nil || !res.OK {
			t.Fatal(res, err)
		}
		d := winner.Load().(codemode.Decision)
		if d.Verdict == codemode.Allow && string(res.Value) != "true" ||
			d.Verdict == codemode.Deny && !strings.Contains(string(res.Value), d.Reason) {
			t.Fatalf("round %d: the winner said %+v, the run returned %s", round, d, res.Value)
		}
	}
}

// Execute puts the question to approve and goes on with its answer;
// answers that do not fit the questions are refused.
func TestExecuteAsks(t *testing.T) {
	n := openNode(t, Config{})
	var fx effects
	startAskingWorker(t, n, &fx)
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var asked []string
	var mu sync.Mutex
	approve := func(_ context.Context, c codemode.Call, question string) codemode.Decision {
		mu.Lock()
		asked = append(asked, c.Name+": "+question)
		mu.Unlock()
		return codemode.Decision{Verdict: codemode.Deny, Reason: "not today"}
	}
	res, err := n.Execute(ctx, rt, chargeProgram, approve)
	if err != nil || !res.OK || !strings.Contains(string(res.Value), "not today") || fx.total() != 0 {
		t.Fatalf("%+v %v (charges %d)", res, err, fx.total())
	}
	if len(asked) != 1 || asked[0] != "shop.charge: Charge this order?" {
		t.Fatalf("asked %q", asked)
	}
	// No one to ask: denied.
	res, err = n.Execute(ctx, rt, chargeProgram, nil)
	if err != nil || !strings.Contains(string(res.Value), "nobody can approve") {
		t.Fatalf("%+v %v", res, err)
	}
	id, _ := n.Submit(ctx, rt, chargeProgram)
	_, q, err := n.Wait(ctx, id)
	if err != nil || q == nil {
		t.Fatal(q, err)
	}
	for _, bad := range []map[int]codemode.Decision{
		{},
		{q.Calls[0].Index + 1: {Verdict: codemode.Allow}},
		{q.Calls[0].Index: {Verdict: codemode.Ask}},
	} {
		if err := n.Answer(ctx, id, q.Step, bad); err == nil || errors.Is(err, ErrAnswered) {
			t.Errorf("answers %v: %v", bad, err)
		}
	}
	if err := n.Answer(ctx, id, q.Step+1, map[int]codemode.Decision{q.Calls[0].Index: {Verdict: codemode.Allow}}); !errors.Is(err, ErrAnswered) {
		t.Errorf("an answer for another step: %v", err)
	}
}
