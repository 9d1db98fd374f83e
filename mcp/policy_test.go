package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServerAsksThroughElicitation: calls the policy asks about go to the
// client's user as an elicitation; a client that cannot elicit gets them
// denied, with the reason in the program's ToolError.
func TestServerAsksThroughElicitation(t *testing.T) {
	var ran sync.Map
	tool := func(name string, a *codemode.Annotations) codemode.Tool {
		return codemode.Tool{Annotations: a, Run: func(context.Context, json.RawMessage) (any, error) {
			ran.Store(name, true)
			return name + " done", nil
		}}
	}
	tools := codemode.Tools{"files": codemode.Tools{
		"read":   tool("read", &codemode.Annotations{ReadOnly: true}),
		"write":  tool("write", nil),
		"delete": tool("delete", &codemode.Annotations{Destructive: true}),
	}}
	srv := newServer(t, tools, codemode.Options{Policy: codemode.Rules{ReadOnly: codemode.Allow, Destructive: codemode.Deny, Default: codemode.Ask}.Policy()})
	const program = `const out = []
for (const [tool, name] of [["read", "a"], ["write", "keep.txt"], ["write", "drop.txt"], ["delete", "a"]]) {
  try { out.push(await tools.files[tool]({ name })) } catch (e) { out.push(e.message) }
}
return out`

	var asked []string
	var mu sync.Mutex
	cs := clientFor(t, srv, &mcpsdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			if strings.Contains(req.Params.Message, "keep.txt") {
				return &mcpsdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
			return &mcpsdk.ElicitResult{Action: "decline"}, nil
		},
	})
	_, sc := callExecute(t, cs, map[string]any{"code": program})
	got, _ := json.Marshal(sc["value"])
	want := `["read done","write done","tools.files.write was denied: the user declined it","tools.files.delete was denied: files.delete is not allowed here"]`
	if string(got) != want {
		t.Fatalf("value %s\nwant  %s", got, want)
	}
	if len(asked) != 2 || !strings.Contains(asked[0], "allow files.write?") || !strings.Contains(asked[0], `{"name":"keep.txt"}`) {
		t.Fatalf("elicitations: %q", asked)
	}
	if _, ok := ran.Load("delete"); ok {
		t.Fatal("a denied tool ran")
	}

	plain := clientFor(t, srv, nil)
	_, sc = callExecute(t, plain, map[string]any{"code": `try { return await tools.files.write({ name: "x" }) } catch (e) { return e.message }`})
	if msg, _ := sc["value"].(string); !strings.Contains(msg, "this MCP client cannot ask the user (it does not support elicitation)") {
		t.Fatalf("without elicitation: %v", sc)
	}
}

// TestServerApprovalStateIsSealed drives the round trips by hand: while
// the user decides, the client holds the run's state, encrypted; a
// changed state, or one replayed in another session, is refused.
func TestServerApprovalStateIsSealed(t *testing.T) {
	var writes atomic.Int64
	tools := codemode.Tools{"files": codemode.Tools{
		"read": codemode.Tool{Annotations: &codemode.Annotations{ReadOnly: true}, Run: func(context.Context, json.RawMessage) (any, error) {
			return map[string]string{"secret": "s3cr3t-from-a-read"}, nil
		}},
		"write": codemode.Tool{Run: func(context.Context, json.RawMessage) (any, error) { writes.Add(1); return "written", nil }},
	}}
	srv := newServer(t, tools, codemode.Options{Policy: codemode.Rules{ReadOnly: codemode.Allow, Default: codemode.Ask}.Policy()})
	manual := &mcpsdk.ClientOptions{
		MultiRoundTrip: &mcpsdk.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			t.Error("the handler ran: the round trip was not left to the test")
			return nil, nil
		},
	}
	cs := clientFor(t, srv, manual)
	const program = `const r = await tools.files.read({}); await tools.files.write({ n: r.secret.length }); return "done"`
	call := func(cs *mcpsdk.ClientSession, p *mcpsdk.CallToolParams) *mcpsdk.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := call(cs, &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": program}})
	if !first.NeedsInput() || len(first.InputRequests) != 1 || first.RequestState == "" {
		t.Fatalf("first result: %+v", first)
	}
	ask, ok := first.InputRequests["1"].(*mcpsdk.ElicitParams)
	if !ok || !strings.Contains(ask.Message, "files.write") {
		t.Fatalf("input request: %+v", first.InputRequests)
	}
	if strings.Contains(first.RequestState, "s3cr3t") {
		t.Fatal("the request state shows what the program read")
	}
	yes := mcpsdk.InputResponseMap{"1": &mcpsdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
	retry := func(cs *mcpsdk.ClientSession, state string) map[string]any {
		res := call(cs, &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": program}, InputResponses: yes, RequestState: state})
		return structured(t, res)
	}
	b := []byte(first.RequestState)
	b[len(b)/2] ^= 1
	if sc := retry(cs, string(b)); sc["ok"] != false || !strings.Contains(fmt.Sprint(sc["error"]), "approval state is not valid") {
		t.Fatalf("changed state: %v", sc)
	}
	other := clientFor(t, srv, manual)
	if sc := retry(other, first.RequestState); sc["ok"] != false || !strings.Contains(fmt.Sprint(sc["error"]), "approval state is not valid") {
		t.Fatalf("state replayed in another session: %v", sc)
	}
	if writes.Load() != 0 {
		t.Fatal("the write ran without approval")
	}
	if sc := retry(cs, first.RequestState); sc["ok"] != true || sc["value"] != "done" || writes.Load() != 1 {
		t.Fatalf("approved: %v (writes %d)", sc, writes.Load())
	}
	// The same approval again, in the same session: refused, the write
	// is not made again.
	for range 3 {
		if sc := retry(cs, first.RequestState); sc["ok"] != false || !strings.Contains(fmt.Sprint(sc["error"]), "answered already") || writes.Load() != 1 {
			t.Fatalf("replayed approval: %v (writes %d)", sc, writes.Load())
		}
	}
	// Retries racing each other: one makes the write.
	second := call(cs, &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": program}})
	var wg sync.WaitGroup
	var done atomic.Int64
	for range 4 {
		wg.Go(func() {
			if sc := retry(cs, second.RequestState); sc["ok"] == true {
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if done.Load() != 1 || writes.Load() != 2 {
		t.Fatalf("%d racing retries succeeded, %d writes", done.Load(), writes.Load())
	}
}

// TestServerPolicyHoldsInTransactions: over MCP too, a transaction does
// not get a denied call past the policy, and an asked call inside one is
// asked about with its whole input, however it is padded.
func TestServerPolicyHoldsInTransactions(t *testing.T) {
	var refunds, transfers atomic.Int64
	tools := codemode.Tools{"shop": codemode.Tools{
		"refundOrder": codemode.Tool{Annotations: &codemode.Annotations{Destructive: true}, Run: func(context.Context, json.RawMessage) (any, error) {
			refunds.Add(1)
			return "refunded", nil
		}},
		"transfer": codemode.Tool{Run: func(context.Context, json.RawMessage) (any, error) { transfers.Add(1); return "sent", nil }},
	}}
	rules, err := codemode.ParseRules("shop.refundOrder=deny,default=ask")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, tools, codemode.Options{Policy: rules.Policy()})
	var asked []string
	var mu sync.Mutex
	cs := clientFor(t, srv, &mcpsdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			return &mcpsdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		},
	})
	_, sc := callExecute(t, cs, map[string]any{"code": `const out = []
try { await tools.$codemode.begin({ touches: ["shop.refundOrder"] }) } catch (e) { out.push(e.message) }
try { await tools.shop.refundOrder({ orderId: "o-1" }) } catch (e) { out.push(e.message) }
await tools.$codemode.begin({ touches: ["shop.transfer"] })
out.push(await tools.shop.transfer({ aaaa: "x".repeat(2500), to: "attacker-iban" }))
return out`})
	got, _ := json.Marshal(sc["value"])
	if refunds.Load() != 0 || transfers.Load() != 1 || !strings.Contains(string(got), "declares shop.refundOrder, which is denied") {
		t.Fatalf("value %s, %d refunds, %d transfers", got, refunds.Load(), transfers.Load())
	}
	if len(asked) != 2 || !strings.Contains(asked[0], "Allow a transaction") || !strings.Contains(asked[1], `"to":"attacker-iban"`) || !strings.Contains(asked[1], "(it declares no annotations") {
		t.Fatalf("asked %d times: %.300q", len(asked), asked)
	}
}

// TestServerAsksOlderClients: a client on a protocol before multi
// round-trip requests is asked with an elicitation while the run waits.
func TestServerAsksOlderClients(t *testing.T) {
	var writes atomic.Int64
	tools := codemode.Tools{"files": codemode.Tools{
		"write": codemode.Tool{Run: func(context.Context, json.RawMessage) (any, error) { writes.Add(1); return "written", nil }},
	}}
	srv := newServer(t, tools, codemode.Options{Policy: codemode.Rules{Default: codemode.Ask}.Policy()})
	ctx := context.Background()
	st, ct := mcpsdk.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "old", Version: "1"}, &mcpsdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			asked = append(asked, req.Params.Message)
			return &mcpsdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": len(asked) == 1}}, nil
		},
	})
	cs, err := client.Connect(ctx, ct, &mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	if v := ss.InitializeParams().ProtocolVersion; v >= mrtrVersion {
		t.Fatalf("negotiated %s", v)
	}
	_, sc := callExecute(t, cs, map[string]any{"code": `const a = await tools.files.write({ n: 1 })
let b
try { b = await tools.files.write({ n: 2 }) } catch (e) { b = e.message }
return [a, b]`})
	got, _ := json.Marshal(sc["value"])
	if string(got) != `["written","tools.files.write was denied: the user did not approve it"]` || len(asked) != 2 || writes.Load() != 1 {
		t.Fatalf("value %s, asked %d times, %d writes", got, len(asked), writes.Load())
	}
}
