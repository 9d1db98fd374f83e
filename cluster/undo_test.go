package cluster

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/nats-io/nats.go"
)

// rollbackTools: reserve can be undone (undos counts its compensations;
// undoBlock, when not nil, holds them), charge always fails, and look
// reads (lookBlock, when not nil, holds it, and entered says so).
func rollbackTools(undos *atomic.Int32, undoBlock, lookBlock chan struct{}, entered chan<- string) codemode.Tools {
	hold := func(ctx context.Context, block chan struct{}, name string) error {
		if block == nil {
			return nil
		}
		entered <- name
		select {
		case <-block:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return codemode.Tools{"shop": codemode.Tools{
		"reserve": codemode.Tool{
			Run: func(context.Context, json.RawMessage) (any, error) { return "r-1", nil },
			Compensate: func(ctx context.Context, _, _ json.RawMessage) error {
				undos.Add(1)
				return hold(ctx, undoBlock, "undo")
			},
		},
		"charge": codemode.Tool{Run: func(context.Context, json.RawMessage) (any, error) {
			return nil, codemode.ToolError("card declined")
		}},
		"look": codemode.Tool{Annotations: &codemode.Annotations{ReadOnly: true}, Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
			return "seen", hold(ctx, lookBlock, "look")
		}},
	}}
}

const rollbackProgram = `
	let tx, why;
	try {
		({ tx } = await tools.$codemode.begin({ touches: ["shop.reserve", "shop.charge"] }));
		await tools.shop.reserve({});
		await tools.shop.charge({});
		await tools.$codemode.commit({ tx });
	} catch (e) {
		try { why = JSON.stringify(await tools.$codemode.rollback({ tx })) } catch (e) { why = e.message }
	}
	return { why, after: await tools.shop.look({}) }`

// A worker that takes a run over replays its rollback from the last
// checkpoint: a compensation the first worker finished is not run again,
// and one it started and never reported is said to be unknown, not run
// again.
func TestRollbackReplayedUndoesOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stallIn    string // where the first worker stops
		wantWhy    string
		wantUndosB int32
	}{
		{"after the compensation", "look", `{"rolledBack":["shop.reserve"]}`, 0},
		{"inside the compensation", "undo", "whether it was undone is unknown", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := openNode(t, Config{AckWait: time.Second})
			stalled := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}, AckWait: time.Second, Name: "stalled"})
			var undosA, undosB atomic.Int32
			block := make(chan struct{})
			defer close(block)
			entered := make(chan string, 4)
			var undoBlock, lookBlock chan struct{}
			if tc.stallIn == "undo" {
				undoBlock = block
			} else {
				lookBlock = block
			}
			startWorker(t, stalled, rollbackTools(&undosA, undoBlock, lookBlock, entered))
			rt := front(t, rollbackTools(new(atomic.Int32), nil, nil, nil))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			id, err := n.Submit(ctx, rt, rollbackProgram)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case where := <-entered:
				if where != tc.stallIn {
					t.Fatalf("stopped in %s", where)
				}
			case <-ctx.Done():
				t.Fatal("the first worker never got there")
			}
			time.Sleep(100 * time.Millisecond) // the ledger's writes land
			stalled.nc.Close()
			startWorker(t, n, rollbackTools(&undosB, nil, nil, nil))
			res, _, err := n.Wait(ctx, id)
			if err != nil || !res.OK {
				t.Fatalf("%+v %v", res, err)
			}
			var v struct{ Why, After string }
			_ = json.Unmarshal(res.Value, &v)
			if !strings.Contains(v.Why, tc.wantWhy) || v.After != "seen" {
				t.Fatalf("value %s", res.Value)
			}
			if undosA.Load() != 1 || undosB.Load() != tc.wantUndosB {
				t.Fatalf("compensations: %d by the first worker, %d by the second", undosA.Load(), undosB.Load())
			}
		})
	}
}
