package cluster

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/mcp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An MCP server whose programs run on a worker: calls the worker's policy
// asks about are put to the client's user by elicitation, with the whole
// input, and the run goes on with the answers; a denied tool never runs.
func TestMCPServerOnTheCluster(t *testing.T) {
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
	policy := codemode.Rules{ReadOnly: codemode.Allow, Destructive: codemode.Deny, Default: codemode.Ask}.Policy()
	n := openNode(t, Config{})
	runWorker(t, n, codemode.Options{Tools: tools, Timeout: 30 * time.Second, Policy: policy}, WorkerOptions{})

	srv, err := mcp.NewServer(mcp.ServerOptions{Runtime: codemode.Options{CacheDir: engineCache, Tools: tools, Policy: policy}, Executor: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	var asked []string
	var mu sync.Mutex
	st, ct := mcpsdk.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, &mcpsdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			if strings.Contains(req.Params.Message, "keep.txt") {
				return &mcpsdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
			return &mcpsdk.ElicitResult{Action: "decline"}, nil
		},
	}).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: mcp.ExecuteTool, Arguments: map[string]any{"code": `const out = []
for (const [tool, name] of [["read", "a"], ["write", "keep.txt"], ["write", "drop.txt"], ["delete", "a"]]) {
  try { out.push(await tools.files[tool]({ name })) } catch (e) { out.push(e.message) }
}
return out`}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(res.StructuredContent.(map[string]any)["value"])
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
}

// Cells through an MCP server whose programs run on the cluster: execute
// answers with a cell id once its yield time has passed, and wait, from
// the same session, collects every line once and then the result; another
// session cannot collect it.
func TestMCPCellsOnTheCluster(t *testing.T) {
	tools := codemode.Tools{"slow": codemode.Tools{"nap": codemode.Tool{
		Annotations: &codemode.Annotations{ReadOnly: true},
		Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
			select {
			case <-time.After(150 * time.Millisecond):
				return "rested", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}}}
	n := openNode(t, Config{})
	runWorker(t, n, codemode.Options{Tools: tools, Timeout: 30 * time.Second}, WorkerOptions{})
	srv, err := mcp.NewServer(mcp.ServerOptions{Runtime: codemode.Options{CacheDir: engineCache, Tools: tools}, Executor: n, Cells: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	connect := func() *mcpsdk.ClientSession {
		st, ct := mcpsdk.NewInMemoryTransports()
		ss, err := srv.MCP().Connect(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
		return cs
	}
	cs, other := connect(), connect()
	call := func(cs *mcpsdk.ClientSession, name string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return res.StructuredContent.(map[string]any)
	}
	out := call(cs, mcp.ExecuteTool, map[string]any{"yieldMs": 200, "code": `
		for (let i = 0; i < 8; i++) { console.log("nap " + i); await tools.slow.nap({}); }
		return "rested"`})
	if out["running"] != true || out["cellId"] == nil {
		t.Fatalf("execute answered %v", out)
	}
	id := out["cellId"].(string)
	var lines []any
	lines = append(lines, out["logs"].([]any)...)
	if o := call(other, mcp.WaitTool, map[string]any{"cellId": id, "timeoutMs": 100}); o["ok"] != false || o["running"] == true {
		t.Fatalf("another session's wait: %v", o)
	}
	for range 50 {
		o := call(cs, mcp.WaitTool, map[string]any{"cellId": id, "timeoutMs": 300})
		l, _ := o["logs"].([]any)
		lines = append(lines, l...)
		if o["running"] != true {
			if o["ok"] != true || o["value"] != "rested" {
				t.Fatalf("the end: %v", o)
			}
			break
		}
	}
	got, _ := json.Marshal(lines)
	if string(got) != `["nap 0","nap 1","nap 2","nap 3","nap 4","nap 5","nap 6","nap 7"]` {
		t.Fatalf("lines %s", got)
	}
}
