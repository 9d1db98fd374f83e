package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/nats-io/nats.go"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// engineCache is shared by the tests' Runtimes and worker processes, so
// the engine compiles once.
var engineCache = filepath.Join(os.TempDir(), "codemode-cluster-test-cache")

// effects counts the calls each idempotency key made.
type effects struct {
	mu   sync.Mutex
	keys map[string]int
}

func (e *effects) add(ctx context.Context) string {
	key, _ := IdempotencyKey(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.keys == nil {
		e.keys = map[string]int{}
	}
	e.keys[key]++
	return key
}

func (e *effects) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.keys {
		n += c
	}
	return n
}

var orderSchema = &jsonschema.Schema{Type: "object", Required: []string{"order"},
	Properties: map[string]*jsonschema.Schema{"order": {Type: "string"}}}

// shopTools: charge changes something (no annotations), price reads,
// refund is idempotent. block, when not nil, holds every charge until it
// is closed.
func shopTools(fx *effects, block chan struct{}) codemode.Tools {
	return codemode.Tools{"shop": codemode.Tools{
		"charge": codemode.Tool{
			Description: "Charges an order.",
			Input:       orderSchema,
			Run: func(ctx context.Context, in json.RawMessage) (any, error) {
				if block != nil {
					select {
					case <-block:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				return map[string]any{"charged": true, "key": fx.add(ctx)}, nil
			},
		},
		"refund": codemode.Tool{
			Description: "Refunds an order.",
			Annotations: &codemode.Annotations{Idempotent: true},
			Input:       orderSchema,
			Run: func(ctx context.Context, in json.RawMessage) (any, error) {
				return map[string]any{"refunded": true, "key": fx.add(ctx)}, nil
			},
		},
		"price": codemode.Tool{
			Description: "Reads a price.",
			Annotations: &codemode.Annotations{ReadOnly: true},
			Input:       &jsonschema.Schema{Type: "object"},
			Run: func(ctx context.Context, in json.RawMessage) (any, error) {
				return 42, nil
			},
		},
	}}
}

func openNode(t testing.TB, cfg Config) *Node {
	t.Helper()
	if cfg.URL == "" && cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	n, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// startWorker runs a worker with tools until the test ends.
func startWorker(t testing.TB, n *Node, tools codemode.Tools) *Worker {
	t.Helper()
	return runWorker(t, n, codemode.Options{Tools: tools, Timeout: 30 * time.Second}, WorkerOptions{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
}

// runWorker runs a worker until the test ends; opts get the test's
// state key and engine cache.
func runWorker(t testing.TB, n *Node, opts codemode.Options, wo WorkerOptions) *Worker {
	t.Helper()
	opts.StateKey, opts.CacheDir = testKey, engineCache
	w, err := NewWorker(n, opts, wo)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; w.Close() })
	return w
}

func front(t testing.TB, tools codemode.Tools) *codemode.Runtime {
	t.Helper()
	rt, err := codemode.New(codemode.Options{CacheDir: engineCache, Tools: tools, StateKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func TestExecuteThroughAWorker(t *testing.T) {
	n := openNode(t, Config{})
	var fx effects
	startWorker(t, n, shopTools(&fx, nil))
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := n.Execute(ctx, rt, `
		const p = await tools.shop.price({ sku: "a" });
		const [a, b] = await Promise.all([tools.shop.charge({ order: "o1" }), tools.shop.charge({ order: "o2" })]);
		const r = await tools.shop.refund({ order: "o1" });
		console.log("done");
		return { p, a: a.charged, b: b.charged, r: r.refunded, keys: [a.key, b.key, r.key] };`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK {
		t.Fatalf("run failed: %+v", res.Error)
	}
	var v struct {
		P       int
		A, B, R bool
		Keys    []string
	}
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
	if v.P != 42 || !v.A || !v.B || !v.R || len(v.Keys) != 3 {
		t.Fatalf("value %s", res.Value)
	}
	for _, k := range v.Keys {
		if !strings.Contains(k, "/") || fx.keys[k] != 1 {
			t.Fatalf("idempotency key %q made %d calls (all: %v)", k, fx.keys[k], fx.keys)
		}
	}
	if len(res.ToolCalls) != 4 || strings.Join(res.Logs, "") != "done" {
		t.Fatalf("audit %+v logs %q", res.ToolCalls, res.Logs)
	}
}

func TestWaitOnAnotherFront(t *testing.T) {
	n := openNode(t, Config{})
	other := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}})
	startWorker(t, n, shopTools(&effects{}, nil))
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := n.Submit(ctx, rt, `return (await tools.shop.charge({ order: "x" })).charged`)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := other.Wait(ctx, id)
	if err != nil || !res.OK || string(res.Value) != "true" {
		t.Fatalf("Wait on the other front: %+v %v", res, err)
	}
	if _, _, err := other.Wait(ctx, "0123abcd"); err == nil || !strings.Contains(err.Error(), "no such run") {
		t.Fatalf("unknown run: %v", err)
	}
	if _, _, err := other.Wait(ctx, "../r.x"); err == nil {
		t.Fatal("a malformed id was waited on")
	}
}

// A worker that stops answering in the middle of a call loses its run to
// another after AckWait: the call in doubt is not made again (charge has
// no annotations) and the program is told its outcome is unknown; its
// late writes are refused.
func TestTakeoverReportsCallsInDoubt(t *testing.T) {
	n := openNode(t, Config{AckWait: time.Second})
	stalled := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}, AckWait: time.Second, Name: "stalled"})
	var fxA, fxB effects
	block := make(chan struct{})
	a := startWorker(t, stalled, shopTools(&fxA, block))
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := n.Submit(ctx, rt, `
		const first = await tools.shop.refund({ order: "o1" });
		let charged;
		try { charged = await tools.shop.charge({ order: "o1" }); } catch (e) { charged = String(e.message); }
		const again = await tools.shop.refund({ order: "o2" });
		return { charged, again: again.refunded };`)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until A is inside charge, then cut A off: no heartbeats, no
	// writes.
	deadline := time.Now().Add(20 * time.Second)
	for fxA.total() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // charge claimed and blocked
	stalled.nc.Close()
	startWorker(t, n, shopTools(&fxB, nil))
	res, _, err := n.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	close(block)
	if !res.OK || !strings.Contains(string(res.Value), "outcome of shop.charge is unknown") {
		t.Fatalf("result %s %+v", res.Value, res.Error)
	}
	if fxB.keys[id+"/1"] != 0 {
		t.Fatalf("the call in doubt was made again: %v", fxB.keys)
	}
	rec, _, err := n.record(ctx, id)
	if err != nil || rec.Takeovers != 1 {
		t.Fatalf("record %+v %v", rec, err)
	}
	_ = a
}

// Jobs that are not what a front sends are dropped without harm, and a
// job delivered again after its run finished runs nothing.
func TestMalformedAndDuplicateJobs(t *testing.T) {
	n := openNode(t, Config{})
	var fx effects
	startWorker(t, n, shopTools(&fx, nil))
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, raw := range []string{"", "not json", `{"id":"../../x","code":"return 1"}`, `{"id":""}`, strings.Repeat("[", 100000)} {
		if _, err := n.js.Publish(ctx, workSubject, []byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := n.Execute(ctx, rt, `return (await tools.shop.charge({ order: "a" })).key`, nil)
	if err != nil || !res.OK {
		t.Fatalf("%+v %v", res, err)
	}
	var key string
	_ = json.Unmarshal(res.Value, &key)
	id, _, _ := strings.Cut(key, "/")
	// The same job again, past the de-duplication window's id.
	dup := mustJSON(job{ID: id, Code: `return (await tools.shop.charge({ order: "a" })).key`, Tree: treeOf(rt)})
	if _, err := n.js.Publish(ctx, workSubject, dup); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		info, err := n.work.Info(ctx)
		if err == nil && info.State.Msgs == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if info, _ := n.work.Info(ctx); info.State.Msgs != 0 {
		t.Fatalf("jobs left in the queue: %d", info.State.Msgs)
	}
	if fx.total() != 1 {
		t.Fatalf("charges made: %v", fx.keys)
	}
}

// A front whose request ends cancels its run on the worker.
func TestCancelReachesTheWorker(t *testing.T) {
	n := openNode(t, Config{})
	started := make(chan struct{}, 1)
	tools := codemode.Tools{"slow": codemode.Tools{"wait": codemode.Tool{
		Description: "Waits.",
		Annotations: &codemode.Annotations{ReadOnly: true},
		Run: func(ctx context.Context, in json.RawMessage) (any, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}}}}
	startWorker(t, n, tools)
	rt := front(t, tools)
	ctx, cancel := context.WithCancel(context.Background())
	var id string
	go func() {
		<-started
		cancel()
	}()
	_, err := n.Execute(ctx, rt, `await tools.slow.wait({}); return 1`, nil)
	if err == nil {
		t.Fatal("Execute returned no error after its context ended")
	}
	// The run's record ends too: the worker was told.
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	for {
		keys, _ := n.runs.Keys(wctx)
		if len(keys) == 1 {
			id = strings.TrimPrefix(keys[0], "r.")
			if rec, _, err := n.record(wctx, id); err == nil && rec.Status == finished {
				if rec.Result.OK {
					t.Fatalf("a cancelled run succeeded: %+v", rec.Result)
				}
				return
			}
		}
		select {
		case <-wctx.Done():
			t.Fatal("the cancelled run never ended")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A worker with another tool tree does not run a front's program with
// its tools: after the last delivery the run ends saying why.
func TestToolTreeMismatch(t *testing.T) {
	n := openNode(t, Config{AckWait: time.Second, MaxDeliver: 2})
	startWorker(t, n, shopTools(&effects{}, nil))
	rt := front(t, codemode.Tools{"other": shopTools(nil, nil)["shop"]})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := n.Execute(ctx, rt, `return 1`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || !strings.Contains(res.Error.Message, "same tools") {
		t.Fatalf("%+v", res)
	}
}

// A worker takes only jobs whose front seals states as it does: the tree
// a job carries names the state format, so during an upgrade a job from
// a front of this version is handed back by a worker of the last one (its
// tree has no format), which could not open the run's states.
func TestTreeNamesStateFormat(t *testing.T) {
	rt := front(t, shopTools(nil, nil))
	tree := treeOf(rt)
	if !strings.HasSuffix(tree, "/"+codemode.StateFormat) || !strings.HasPrefix(tree, rt.ToolTreeSum()+"/") {
		t.Fatalf("tree %q", tree)
	}
	if before := rt.ToolTreeSum() + "/" + enginebin.SHA256[:16]; tree == before {
		t.Fatal("the tree is the one a worker of the last version has")
	}
	// The image, not only the engine build: a version with another
	// prelude on the same engine cannot resume these states.
	img, err := rt.ImageSum()
	if err != nil {
		t.Fatal(err)
	}
	if want := rt.ToolTreeSum() + "/" + img[:16] + "/" + codemode.StateFormat; tree != want {
		t.Fatalf("tree %q, want %q (the image's sum)", tree, want)
	}
}

func TestServerVersions(t *testing.T) {
	for v, old := range map[string]bool{"2.9.25": true, "2.10.0": true, "2.11.9": true, "2.12.0": false, "2.12.0-beta.1": false, "2.15.2": false, "1.4.1": true, "3.0.0": false, "": true} {
		if tooOld(v) != old {
			t.Errorf("tooOld(%q) = %v", v, !old)
		}
	}
}

// A result too large for a record ends the run with a diagnostic, rather
// than failing every attempt to record it until the job is given up.
func TestResultTooLargeForARecord(t *testing.T) {
	n := openNode(t, Config{})
	startWorker(t, n, shopTools(&effects{}, nil))
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := n.Execute(ctx, rt, `return "x".repeat(9 << 20)`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || !strings.Contains(res.Error.Message, "a cluster run can hand back") {
		t.Fatalf("%.300v", res)
	}
}

// With AskInDoubt, a call in doubt after a takeover becomes a question:
// the run parks, and the answer decides whether the call is made again
// (with the same idempotency key) or the program is told its outcome is
// unknown.
func TestAskInDoubt(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run(fmt.Sprint("allow=", allow), func(t *testing.T) {
			n := openNode(t, Config{AckWait: time.Second})
			stalled := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}, AckWait: time.Second, Name: "stalled"})
			var fxA, fxB effects
			block := make(chan struct{})
			defer close(block)
			startWorker(t, stalled, shopTools(&fxA, block))
			rt := front(t, shopTools(nil, nil))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			id, err := n.Submit(ctx, rt, `
				try { return (await tools.shop.charge({ order: "o1" })).key } catch (e) { return e.message }`)
			if err != nil {
				t.Fatal(err)
			}
			for {
				if rec, _, _ := n.record(ctx, id); rec.Status == running && rec.Step > 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // charge claimed and blocked
			stalled.nc.Close()
			runWorker(t, n, codemode.Options{Tools: shopTools(&fxB, nil), Timeout: 30 * time.Second}, WorkerOptions{AskInDoubt: true})
			_, asked, err := n.Wait(ctx, id)
			if err != nil || asked == nil || len(asked.Calls) != 1 || asked.Calls[0].Name != "shop.charge" || !strings.Contains(asked.Calls[0].Reason, "Make it again?") {
				t.Fatalf("asked %+v %v", asked, err)
			}
			d := codemode.Decision{Verdict: codemode.Deny, Reason: "I will check by hand"}
			if allow {
				d = codemode.Decision{Verdict: codemode.Allow}
			}
			if err := n.Answer(ctx, id, asked.Step, map[int]codemode.Decision{asked.Calls[0].Index: d}); err != nil {
				t.Fatal(err)
			}
			res, _, err := n.Wait(ctx, id)
			if err != nil || !res.OK {
				t.Fatalf("%+v %v", res, err)
			}
			if allow {
				key := fmt.Sprintf("%s/%d", id, asked.Calls[0].Index)
				if string(res.Value) != `"`+key+`"` || fxB.keys[key] != 1 {
					t.Fatalf("made again: %s, %v", res.Value, fxB.keys)
				}
			} else if !strings.Contains(string(res.Value), "outcome of shop.charge is unknown") || !strings.Contains(string(res.Value), "I will check by hand") || fxB.total() != 0 {
				t.Fatalf("not made again: %s, %v", res.Value, fxB.keys)
			}
		})
	}
}
