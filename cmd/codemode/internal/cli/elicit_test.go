package cli

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPUpstreamElicitation: server-everything's tool that asks its user
// something, called by a program through codemode mcp, reaches the user
// of the MCP client that ran the program (a go-sdk client that answers),
// naming the server that asks; a client that cannot ask has the question
// declined, and the log says so.
func TestMCPUpstreamElicitation(t *testing.T) {
	cfg := everythingConfig(t)
	const program = `return await tools.everything["trigger-elicitation-request"]({})`
	t.Run("asked, client with multi round trips", func(t *testing.T) {
		var asked atomic.Value
		copts := &mcpsdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			asked.Store(req.Params.Message)
			return &mcpsdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace"}}, nil
		}}
		cs, stderr, _, _ := startStdioClient(t, context.Background(), copts, "--config", cfg)
		isErr, v := callExecute(t, cs, program)
		if isErr || !strings.Contains(toJSON(v["value"]), "Name: Ada Lovelace") {
			t.Fatalf("result = %v\n%s", v, stderr)
		}
		if m, _ := asked.Load().(string); !strings.HasPrefix(m, `The MCP server "everything" asks`) {
			t.Errorf("the user was asked %q", m)
		}
	})
	t.Run("asked, client on 2025-11-25", func(t *testing.T) {
		// An older client is asked by elicitation within the request.
		url, stderr := startHTTPAt(t, "127.0.0.1:0", "--config", cfg)
		var asked atomic.Int32
		copts := &mcpsdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
			asked.Add(1)
			return &mcpsdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Grace Hopper"}}, nil
		}}
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "old", Version: "1"}, copts).
			Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url}, &mcpsdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		isErr, v := callExecute(t, cs, program)
		if isErr || !strings.Contains(toJSON(v["value"]), "Name: Grace Hopper") || asked.Load() != 1 {
			t.Fatalf("result = %v, asked %d times\n%s", v, asked.Load(), stderr)
		}
	})
	t.Run("client cannot ask", func(t *testing.T) {
		cs, stderr, _ := startStdio(t, context.Background(), "--config", cfg)
		isErr, v := callExecute(t, cs, program)
		if isErr || !strings.Contains(toJSON(v["value"]), "declined") {
			t.Fatalf("result = %v\n%s", v, stderr)
		}
		if !strings.Contains(stderr.String(), "it does not support elicitation") {
			t.Errorf("the refusal is not logged:\n%s", stderr)
		}
	})
}
