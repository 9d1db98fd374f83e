package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// adder is a small local tool for server tests.
func adder(t *testing.T) codemode.Tool {
	t.Helper()
	tool, err := codemode.NewTool("Adds two numbers.", func(_ context.Context, in struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}) (float64, error) {
		return in.A + in.B, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func newServer(t *testing.T, tools codemode.Tools, opts codemode.Options) *Server {
	t.Helper()
	opts.Tools = tools
	if opts.Timeout == 0 {
		opts.Timeout = 20 * time.Second
	}
	srv, err := NewServer(ServerOptions{Runtime: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// clientFor connects a go-sdk client to srv over in-memory transports.
func clientFor(t *testing.T, srv *Server, copts *mcpsdk.ClientOptions) *mcpsdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcpsdk.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

func callExecute(t *testing.T, cs *mcpsdk.ClientSession, args any) (*mcpsdk.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return res, structured(t, res)
}

// structured checks that the text content and structuredContent agree
// and returns the latter.
func structured(t *testing.T, res *mcpsdk.CallToolResult) map[string]any {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content = %v", res.Content)
	}
	text := res.Content[0].(*mcpsdk.TextContent).Text
	var fromText, fromStructured map[string]any
	if err := json.Unmarshal([]byte(text), &fromText); err != nil {
		t.Fatalf("text is not JSON: %v\n%s", err, text)
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &fromStructured)
	a, _ := json.Marshal(fromText)
	if string(a) != string(b) {
		t.Errorf("text and structuredContent differ:\n%s\n%s", a, b)
	}
	return fromStructured
}

func TestServerExecute(t *testing.T) {
	srv := newServer(t, codemode.Tools{"math": codemode.Tools{"add": adder(t)}}, codemode.Options{})
	cs := clientFor(t, srv, nil)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "execute" {
		t.Fatalf("tools = %v", list.Tools)
	}
	tool := list.Tools[0]
	if tool.Description != srv.Runtime().Instructions() || !strings.Contains(tool.Description, "math.add") {
		t.Errorf("description is not the instructions:\n%s", tool.Description)
	}
	schema, _ := json.Marshal(tool.InputSchema)
	if !strings.Contains(string(schema), `"required":["code"]`) {
		t.Errorf("input schema = %s", schema)
	}

	res, v := callExecute(t, cs, map[string]any{"code": `return "<b>" + (await tools.math.add({ a: 1, b: 2 })) + "</b>"`})
	if res.IsError || v["ok"] != true || v["value"] != "<b>3</b>" {
		t.Errorf("result = %v (isError %v)", v, res.IsError)
	}
	if text := res.Content[0].(*mcpsdk.TextContent).Text; !strings.Contains(text, `"<b>3</b>"`) {
		t.Errorf("text escapes HTML: %s", text)
	}

	res, v = callExecute(t, cs, map[string]any{"code": `console.log("before"); throw new Error("boom")`})
	errObj, _ := v["error"].(map[string]any)
	if !res.IsError || v["ok"] != false || errObj["kind"] != "ExecutionFailure" || !strings.Contains(errObj["message"].(string), "boom") {
		t.Errorf("failure = %v (isError %v)", v, res.IsError)
	}

	for args, want := range map[string]string{
		`{}`:                   `the "code" argument is missing`,
		`{"code": 5}`:          `must be a string`,
		`{"code": ""}`:         `empty`,
		`{"code": "return ("}`: `Unexpected`,
		`[1]`:                  `must be an object`,
	} {
		res, v := callExecute(t, cs, json.RawMessage(args))
		e, _ := v["error"].(map[string]any)
		if !res.IsError || e["kind"] != "ParseError" || !strings.Contains(e["message"].(string), want) {
			t.Errorf("%s: %v (isError %v)", args, v, res.IsError)
		}
	}
}

func TestServerProgress(t *testing.T) {
	srv := newServer(t, codemode.Tools{"math": codemode.Tools{"add": adder(t)}}, codemode.Options{})
	var mu sync.Mutex
	var got []*mcpsdk.ProgressNotificationParams
	cs := clientFor(t, srv, &mcpsdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcpsdk.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, req.Params)
		mu.Unlock()
	}})
	params := &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": `
		let n = 0
		for (let i = 0; i < 3; i++) n = await tools.math.add({ a: n, b: 1 })
		return n`}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("%v %v", res, err)
	}
	// Notifications travel ahead of the response on the same stream, but
	// the client dispatches them concurrently: allow a moment.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("%d progress notifications, want 3", len(got))
	}
	seen := map[float64]bool{}
	for _, p := range got {
		if p.ProgressToken != "tok-1" || !strings.Contains(p.Message, "last: math.add") {
			t.Errorf("notification = %+v", p)
		}
		seen[p.Progress] = true
	}
	if !seen[1] || !seen[2] || !seen[3] {
		t.Errorf("progress values = %v", seen)
	}

	// Without a token, none.
	got = got[:0]
	mu.Unlock()
	callExecute(t, cs, map[string]any{"code": `return await tools.math.add({ a: 1, b: 1 })`})
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	if len(got) != 0 {
		t.Errorf("%d notifications without a token", len(got))
	}
}

func TestServerSetTools(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	slow := codemode.Tool{Description: "Waits.", Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(started)
		<-release
		return "old tools", nil
	}}
	srv := newServer(t, codemode.Tools{"v1": codemode.Tools{"slow": slow}}, codemode.Options{})
	changed := make(chan struct{}, 4)
	cs := clientFor(t, srv, &mcpsdk.ClientOptions{ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) {
		changed <- struct{}{}
	}})

	type outcome struct {
		v   map[string]any
		err error
	}
	inflight := make(chan outcome, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": `return await tools.v1.slow({})`}})
		if err != nil {
			inflight <- outcome{err: err}
			return
		}
		var v map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &v)
		inflight <- outcome{v: v}
	}()
	<-started
	if err := srv.SetTools(codemode.Tools{"v2": codemode.Tools{"add": adder(t)}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed after SetTools")
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := list.Tools[0].Description; !strings.Contains(d, "v2.add") || strings.Contains(d, "v1.slow") {
		t.Errorf("description not updated:\n%s", d)
	}
	_, v := callExecute(t, cs, map[string]any{"code": `return ["v1" in tools, await tools.v2.add({ a: 2, b: 2 })]`})
	if b, _ := json.Marshal(v["value"]); string(b) != `[false,4]` {
		t.Errorf("new run = %s", b)
	}
	close(release)
	o := <-inflight
	if o.err != nil || o.v["value"] != "old tools" {
		t.Errorf("the run in flight = %v, %v", o.v, o.err)
	}

	// An invalid tree is refused and the old one kept.
	if err := srv.SetTools(codemode.Tools{"bad": 42}); err == nil {
		t.Error("SetTools accepted an invalid tree")
	}
	_, v = callExecute(t, cs, map[string]any{"code": `return "v2" in tools && !("bad" in tools)`})
	if b, _ := json.Marshal(v["value"]); string(b) != `true` {
		t.Errorf("after a refused SetTools: %s", b)
	}
}

// TestServerHTTPClientDisconnect: a client leaves mid-run. A client that
// cancels its call or ends its session stops the run at once; one that
// just vanishes (its connections drop) leaves the run to end at its
// deadline, since a 2025-era streamable HTTP session outlives its
// connections. Either way the run ends cleanly and the next client is
// served.
func TestServerHTTPClientDisconnect(t *testing.T) {
	for _, how := range []string{"cancel", "end session", "vanish"} {
		t.Run(how, func(t *testing.T) {
			started := make(chan struct{}, 1)
			cancelled := make(chan struct{}, 1)
			block := codemode.Tool{Description: "Blocks until cancelled.", Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
				started <- struct{}{}
				<-ctx.Done()
				cancelled <- struct{}{}
				return nil, ctx.Err()
			}}
			logger, logs := newLogRecorder()
			timeout := 3 * time.Second
			srv, err := NewServer(ServerOptions{Logger: logger, Runtime: codemode.Options{
				Timeout: timeout,
				Tools:   codemode.Tools{"t": codemode.Tools{"block": block, "add": adder(t)}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.Close() })
			ts := httptest.NewServer(srv.HTTPHandler())
			t.Cleanup(ts.Close)
			dial := func() *mcpsdk.ClientSession {
				cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
					Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return cs
			}
			first := dial()
			// Before ts.Close, which waits for the session's event stream.
			t.Cleanup(func() { _ = first.Close() })
			callCtx, cancelCall := context.WithCancel(context.Background())
			defer cancelCall()
			go func() {
				_, _ = first.CallTool(callCtx, &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": `return await tools.t.block({})`}})
			}()
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the run did not start")
			}
			start := time.Now()
			switch how {
			case "cancel":
				cancelCall() // sends notifications/cancelled
			case "end session":
				req, _ := http.NewRequest(http.MethodDelete, ts.URL, nil)
				req.Header.Set("Mcp-Session-Id", first.ID())
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			case "vanish":
				ts.CloseClientConnections()
			}
			select {
			case <-cancelled:
			case <-time.After(10 * time.Second):
				t.Fatal("the run of the departed client never ended")
			}
			if took := time.Since(start); how != "vanish" && took > timeout/2 {
				t.Errorf("the run ended after %v, not when the client left", took)
			}

			second := dial()
			defer second.Close()
			res, err := second.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": `return await tools.t.add({ a: 40, b: 2 })`}})
			if err != nil || res.IsError {
				t.Fatalf("follow-up call: %v %v", res, err)
			}
			if v := structured(t, res); v["value"] != 42.0 {
				t.Errorf("follow-up value = %v", v["value"])
			}
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(logs(), "execute ok=false") && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			line := grepLine(logs(), "execute ok=false")
			if line == "" {
				t.Errorf("the ended run is not logged:\n%s", logs())
			}
			t.Logf("run of the departed client: %s", line)
		})
	}
}

func grepLine(text, sub string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestServerLogsPrivateToolErrors: a tool's own error stays out of the
// result but reaches the operator's log.
func TestServerLogsPrivateToolErrors(t *testing.T) {
	logger, logs := newLogRecorder()
	broken := codemode.Tool{Description: "Fails privately.", Run: func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("dial postgres://admin:hunter2@db: refused")
	}}
	srv, err := NewServer(ServerOptions{Logger: logger, Runtime: codemode.Options{Tools: codemode.Tools{"db": codemode.Tools{"query": broken}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cs := clientFor(t, srv, nil)
	res, v := callExecute(t, cs, map[string]any{"code": `return await tools.db.query({})`})
	text := res.Content[0].(*mcpsdk.TextContent).Text
	if !res.IsError || strings.Contains(text, "hunter2") || !strings.Contains(text, "Tool execution failed") {
		t.Errorf("result = %v", v)
	}
	if !strings.Contains(logs(), "tool call failed tool=db.query outcome=error") || !strings.Contains(logs(), "hunter2") {
		t.Errorf("the private error is not logged:\n%s", logs())
	}
}
