package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/mcp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An MCP server's tools, from a session the host connected itself, called
// from a program.
func ExampleSessionTools() {
	// A server with one tool, reached over in-memory transports.
	server := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "weather", Version: "1"}, nil)
	server.AddTool(&mcpsdk.Tool{Name: "forecast", Description: "Tomorrow's forecast for a city.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			var in struct{ City string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return &mcpsdk.CallToolResult{StructuredContent: map[string]any{"city": in.City, "high": 21}}, nil
		})
	st, ct := mcpsdk.NewInMemoryTransports()
	ss, _ := server.Connect(context.Background(), st, nil)
	defer ss.Close()
	session, _ := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "host", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	defer session.Close()

	tools, err := mcp.SessionTools(context.Background(), session, mcp.SessionOptions{})
	if err != nil {
		panic(err)
	}
	res, _ := codemode.Execute(context.Background(), codemode.Options{Tools: codemode.Tools{"weather": tools}}, `
		const days = await Promise.all(["Lisbon", "Oslo"].map((city) => tools.weather.forecast({ city })))
		return days.map((d) => d.city + ": " + d.high)`)
	fmt.Println(string(res.Value))
	// Output:
	// ["Lisbon: 21","Oslo: 21"]
}

// codemode served over MCP: a client sees one tool, execute, whose
// description lists the host's tools, and runs programs with it.
func ExampleNewServer() {
	add, _ := codemode.NewTool("Add two numbers.", func(_ context.Context, in struct{ A, B float64 }) (float64, error) {
		return in.A + in.B, nil
	})
	srv, err := mcp.NewServer(mcp.ServerOptions{
		Runtime: codemode.Options{Tools: codemode.Tools{"math": codemode.Tools{"add": add}}}.WithUntrustedLimits(),
	})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	st, ct := mcpsdk.NewInMemoryTransports()
	ss, _ := srv.MCP().Connect(context.Background(), st, nil)
	defer ss.Close()
	client, _ := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "client", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	defer client.Close()

	list, _ := client.ListTools(context.Background(), nil)
	fmt.Println(len(list.Tools), list.Tools[0].Name)
	res, _ := client.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute",
		Arguments: map[string]any{"code": `return await tools.math.add({ A: 2, B: 40 })`}})
	var result codemode.Result // the structured content is a codemode.Result
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &result)
	fmt.Println(result.OK, string(result.Value), result.ToolCalls[0].Name, result.ToolCalls[0].Outcome)
	// Output:
	// 1 execute
	// true 42 math.add ok
}

// A config file as an MCP client writes it: disabled servers are left
// out, and fields codemode does not use are warnings, not errors.
func ExampleParseConfig() {
	cfg, err := mcp.ParseConfig([]byte(`{"mcpServers": {
		"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"], "autoApprove": ["read_file"]},
		"docs": {"serverUrl": "https://docs.example.com/mcp"},
		"old": {"command": "old-server", "disabled": true}
	}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(len(cfg.Servers), cfg.Servers["docs"].URL)
	for _, w := range cfg.Warnings {
		fmt.Println(w)
	}
	// Output:
	// 2 https://docs.example.com/mcp
	// server "files": field "autoApprove" is ignored: there is no approval step: a program may call every tool the server lists (limit them with allowTools or denyTools)
}
