package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSessionTools: the tools of a session the host connected itself (here
// over in-memory transports) run from programs, filtered, with the
// server's errors as ToolErrors and a closed session as a ToolFailure.
func TestSessionTools(t *testing.T) {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "calc", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}}}`)
	srv.AddTool(&mcpsdk.Tool{Name: "add", Description: "Add two numbers.", InputSchema: obj}, func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		var in struct{ A, B float64 }
		_ = json.Unmarshal(req.Params.Arguments, &in)
		return &mcpsdk.CallToolResult{StructuredContent: map[string]float64{"sum": in.A + in.B}}, nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "refuse", InputSchema: obj}, func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "refused: b must be positive"}
	})
	srv.AddTool(&mcpsdk.Tool{Name: "admin_reset", InputSchema: obj}, func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		t.Error("a denied tool ran")
		return nil, nil
	})
	st, ct := mcpsdk.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "host", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := SessionTools(context.Background(), cs, SessionOptions{Deny: []string{"admin_*"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools["add"] == nil || tools["refuse"] == nil {
		t.Fatalf("got tools %v, want add and refuse", tools)
	}
	rt, err := codemode.New(codemode.Options{Tools: codemode.Tools{"calc": tools}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	res, err := rt.Execute(context.Background(), `
		const { sum } = await tools.calc.add({ a: 2, b: 3 })
		let refused
		try { await tools.calc.refuse({ a: 1, b: -1 }) } catch (e) { refused = e.kind + ": " + e.message }
		return [sum, refused, "admin_reset" in tools.calc]`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Value), `[5,"ToolFailure: refused: b must be positive",false]`; got != want {
		t.Errorf("got %s, want value %s", resultText(res), want)
	}
	_ = cs.Close()
	res, _ = rt.Execute(context.Background(), `try { await tools.calc.add({ a: 1, b: 1 }) } catch (e) { return e.kind + ": " + e.message }`)
	if got := string(res.Value); !strings.Contains(got, "ToolFailure: the MCP session failed") {
		t.Errorf("after the session closed: got %s", resultText(res))
	}
}

func resultText(res codemode.Result) string {
	b, _ := json.Marshal(res)
	return string(b)
}
