package cluster

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/nats-io/nats.go"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

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

func openNode(t *testing.T, cfg Config) *Node {
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

// startWorker runs a worker until the test ends.
func startWorker(t *testing.T, n *Node, tools codemode.Tools) *Worker {
	t.Helper()
	w, err := NewWorker(n, codemode.Options{Tools: tools, StateKey: testKey, Timeout: 30 * time.Second}, WorkerOptions{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; w.Close() })
	return w
}

func front(t *testing.T, tools codemode.Tools) *codemode.Runtime {
	t.Helper()
	rt, err := codemode.New(codemode.Options{Tools: tools, StateKey: testKey})
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
		return { p, a: a.charged, b: b.charged, r: r.refunded, keys: [a.key, b.key, r.key] };`)
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
	res, err := other.Wait(ctx, id)
	if err != nil || !res.OK || string(res.Value) != "true" {
		t.Fatalf("Wait on the other front: %+v %v", res, err)
	}
	if _, err := other.Wait(ctx, "0123abcd"); err == nil || !strings.Contains(err.Error(), "no such run") {
		t.Fatalf("unknown run: %v", err)
	}
	if _, err := other.Wait(ctx, "../r.x"); err == nil {
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
	res, err := n.Wait(ctx, id)
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
