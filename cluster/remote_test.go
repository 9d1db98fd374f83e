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

// Tools that live in the front run there, called by the worker over the
// cluster: the worker holds no secret, a ToolError's message passes, any
// other error stays private, and with no front serving them the call
// fails closed.
func TestToolsInTheFront(t *testing.T) {
	n := openNode(t, Config{})
	var ranInFront atomic.Int64
	var sawSession, sawKey atomic.Value
	const secret = "sk-live-in-the-front-only"
	tools := codemode.Tools{"bank": codemode.Tools{
		"pay": codemode.Tool{Description: "Pays.", Input: orderSchema, Run: func(ctx context.Context, in json.RawMessage) (any, error) {
			ranInFront.Add(1)
			s, _ := codemode.SessionFrom(ctx)
			k, _ := IdempotencyKey(ctx)
			sawSession.Store(s)
			sawKey.Store(k)
			var v struct{ Order string }
			_ = json.Unmarshal(in, &v)
			switch v.Order {
			case "refused":
				return nil, codemode.ToolError("the bank refused " + v.Order)
			case "broken":
				return nil, context.DeadlineExceeded // private: shown as a failure only
			}
			return map[string]string{"paid": v.Order, "with": secret[:7]}, nil
		}},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := n.ServeTools(ctx, tools); err != nil {
		t.Fatal(err)
	}
	wn := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}})
	startWorker(t, wn, wn.Remote(tools))
	rt := front(t, tools)
	rctx, rcancel := context.WithTimeout(codemode.WithSession(context.Background(), "alice"), 30*time.Second)
	defer rcancel()
	res, err := n.Execute(rctx, rt, `
		const out = [];
		for (const order of ["o-1", "refused", "broken"]) {
			try { out.push((await tools.bank.pay({ order })).paid); } catch (e) { out.push(e.message); }
		}
		return out;`, nil)
	if err != nil || !res.OK {
		t.Fatalf("%+v %v", res, err)
	}
	want := `["o-1","the bank refused refused","Tool execution failed"]`
	if string(res.Value) != want || ranInFront.Load() != 3 {
		t.Fatalf("value %s, want %s (ran in the front %d times)", res.Value, want, ranInFront.Load())
	}
	if sawSession.Load() != "alice" || !strings.Contains(sawKey.Load().(string), "/") {
		t.Fatalf("the front's tool saw session %v and key %v", sawSession.Load(), sawKey.Load())
	}
	cancel() // the front stops serving its tools
	time.Sleep(100 * time.Millisecond)
	res, err = n.Execute(rctx, rt, `try { return await tools.bank.pay({ order: "o-2" }) } catch (e) { return e.message }`, nil)
	if err != nil || !strings.Contains(string(res.Value), "no front serving it is connected") || ranInFront.Load() != 3 {
		t.Fatalf("with no front: %s %v (ran %d)", res.Value, err, ranInFront.Load())
	}
}
