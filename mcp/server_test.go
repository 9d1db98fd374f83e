package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
		// Counted in words: "1 tool call", then "2 tool calls".
		want := map[float64]string{1: "1 tool call finished", 2: "2 tool calls finished", 3: "3 tool calls finished"}[p.Progress]
		if !strings.HasPrefix(p.Message, want) {
			t.Errorf("got progress message %q, want it to start with %q", p.Message, want)
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
	if err := srv.SetTools(codemode.Tools{"bad": codemode.Tools{"then": codemode.Tool{Run: func(context.Context, json.RawMessage) (any, error) { return nil, nil }}}}); err == nil {
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

// gates hold the calls of the blocker tool, one gate per caller name.
type gates struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (g *gates) get(who string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]chan struct{}{}
	}
	if g.m[who] == nil {
		g.m[who] = make(chan struct{})
	}
	return g.m[who]
}

// open lets the calls of who finish.
func (g *gates) open(who string) { close(g.get(who)) }

// openAll lets every call finish, so the cleanups do not wait for a
// run's timeout.
func (g *gates) openAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.m {
		select {
		case <-c:
		default:
			close(c)
		}
	}
}

// blocker is a tool called with {who}: it reports who on started and
// holds its run until who's gate opens (or the run ends).
func blocker(started chan<- string, g *gates) codemode.Tool {
	return codemode.Tool{Description: "Blocks until released.", Run: func(ctx context.Context, in json.RawMessage) (any, error) {
		var arg struct{ Who string }
		if err := json.Unmarshal(in, &arg); err != nil {
			return nil, err
		}
		started <- arg.Who
		select {
		case <-g.get(arg.Who):
			return "released", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
}

// TestServerRunLimit: with MaxRuns n, n runs of different sessions run at
// once (the cap does not serialize them), the next one waits until one of
// them ends, and a call whose request ends while it waits never runs and
// gets a result saying why.
func TestServerRunLimit(t *testing.T) {
	for _, maxRuns := range []int{1, 2} {
		t.Run(fmt.Sprintf("MaxRuns=%d", maxRuns), func(t *testing.T) {
			started := make(chan string, 8)
			g := &gates{}
			logger, logs := newLogRecorder()
			srv, err := NewServer(ServerOptions{Logger: logger, MaxRuns: maxRuns, Runtime: codemode.Options{
				Timeout: 60 * time.Second,
				Tools:   codemode.Tools{"t": codemode.Tools{"block": blocker(started, g)}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.Close() })
			// Deferred, so it runs before the clients' cleanups wait for
			// their sessions' runs.
			defer g.openAll()
			call := func(ctx context.Context, who string) <-chan error {
				cs := clientFor(t, srv, nil)
				done := make(chan error, 1)
				go func() {
					res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{
						"code": `return await tools.t.block({ who: "` + who + `" })`}})
					if err == nil && res.IsError {
						err = fmt.Errorf("isError: %v", res.StructuredContent)
					}
					done <- err
				}()
				return done
			}
			waitStarted := func(t *testing.T, want string) {
				t.Helper()
				select {
				case got := <-started:
					if got != want {
						t.Fatalf("got run %s started, want %s", got, want)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("run %s did not start", want)
				}
			}
			notStarted := func(t *testing.T, why string) {
				t.Helper()
				// Not a timing assertion: with the cap kept, no run can
				// start; the pause only gives a broken cap the chance to
				// show.
				select {
				case got := <-started:
					t.Fatalf("got run %s started, want none: %s", got, why)
				case <-time.After(500 * time.Millisecond):
				}
			}

			// Every slot taken at once: the cap lets runs overlap.
			var first <-chan error
			for i := range maxRuns {
				who := fmt.Sprintf("holder%d", i)
				done := call(context.Background(), who)
				if i == 0 {
					first = done
				}
				waitStarted(t, who)
			}

			t.Run("next run waits", func(t *testing.T) {
				call(context.Background(), "waiter")
				notStarted(t, "every slot is held")
				g.open("holder0")
				if err := <-first; err != nil {
					t.Errorf("got %v, want holder0's run to succeed", err)
				}
				// The waiter takes holder0's slot and keeps it, so every
				// slot stays held for the subtests below.
				waitStarted(t, "waiter")
			})

			t.Run("client cancels while waiting", func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				done := call(ctx, "cancelled")
				time.Sleep(200 * time.Millisecond) // let the request arrive
				cancel()                           // sends notifications/cancelled
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("got %v, want context.Canceled", err)
				}
				deadline := time.Now().Add(20 * time.Second)
				for !strings.Contains(logs(), "execute refused") && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if line := grepLine(logs(), "execute refused"); !strings.Contains(line, fmt.Sprintf("maxRuns=%d", maxRuns)) {
					t.Errorf("got log line %q, want an \"execute refused\" record with maxRuns=%d\n%s", line, maxRuns, logs())
				}
				notStarted(t, "the cancelled call must never run")
			})

			t.Run("request ends while waiting", func(t *testing.T) {
				// What a client sees when its request ends while it still
				// reads the answer (a deadline rather than a cancel):
				// called directly, since a cancelling SDK client stops
				// reading.
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				res, err := srv.execute(ctx, &mcpsdk.CallToolRequest{Params: &mcpsdk.CallToolParamsRaw{
					Name: ExecuteTool, Arguments: json.RawMessage(`{"code": "return 1"}`)}})
				if err != nil {
					t.Fatal(err)
				}
				var v map[string]any
				if err := json.Unmarshal(res.StructuredContent.(json.RawMessage), &v); err != nil {
					t.Fatal(err)
				}
				e, _ := v["error"].(map[string]any)
				msg, _ := e["message"].(string)
				if !res.IsError || e["kind"] != "ExecutionFailure" || !strings.Contains(msg, fmt.Sprintf("limit of %s at once", map[int]string{1: "1 program", 2: "2 programs"}[maxRuns])) {
					t.Errorf("got %v (isError %v), want an ExecutionFailure naming the limit of %d", v, res.IsError, maxRuns)
				}
			})
		})
	}
}

func TestServerRunLimitInvalid(t *testing.T) {
	if _, err := NewServer(ServerOptions{MaxRuns: -1}); err == nil {
		t.Error("got no error for MaxRuns -1, want one")
	}
}

// rawInitialize opens a session with a bare HTTP request, so no client
// keeps it busy, and returns the status, the session id and the body.
func rawInitialize(t *testing.T, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(body)
}

// sessionCount is the number of sessions the server holds.
func sessionCount(srv *Server) int {
	n := 0
	for range srv.MCP().Sessions() {
		n++
	}
	return n
}

// TestServerHTTPSessionIdle: a session without requests for
// SessionIdleTimeout is closed and its slot and memory freed; its id is
// then unknown (404), which tells its client to start a new session.
func TestServerHTTPSessionIdle(t *testing.T) {
	srv := newServerWith(t, ServerOptions{SessionIdleTimeout: 300 * time.Millisecond})
	ts := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(ts.Close)
	status, first, body := rawInitialize(t, ts.URL)
	if status != http.StatusOK {
		t.Fatalf("got status %d, want 200: %s", status, body)
	}
	// Not a timing assertion beyond a generous bound: the session closes
	// once it has been idle for its timeout.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && srv.session(first) != nil; time.Sleep(50 * time.Millisecond) {
	}
	if srv.session(first) != nil {
		t.Errorf("got session %s still held, want it closed", first)
	}
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", first)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("got status %d for the expired session, want 404", resp.StatusCode)
	}
}

func newServerWith(t *testing.T, opts ServerOptions) *Server {
	t.Helper()
	srv, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// TestServerUnavailableNote: SetTools with unavailable namespaces names
// each, with its reason, at the end of the execute description, and
// notifies clients; once they are available the note goes, with another
// notification.
func TestServerUnavailableNote(t *testing.T) {
	srv := newServer(t, codemode.Tools{"math": codemode.Tools{"add": adder(t)}}, codemode.Options{})
	changed := make(chan struct{}, 4)
	cs := clientFor(t, srv, &mcpsdk.ClientOptions{ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) {
		changed <- struct{}{}
	}})
	description := func() string {
		t.Helper()
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(list.Tools) != 1 {
			t.Fatalf("got %v, %v; want the execute tool", list, err)
		}
		return list.Tools[0].Description
	}
	waitChanged := func() {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatal("got no tools/list_changed, want one")
		}
	}
	if d := description(); strings.Contains(d, "Unavailable") {
		t.Fatalf("got an unavailable section with every namespace available:\n%s", d)
	}
	err := srv.SetTools(codemode.Tools{"math": codemode.Tools{"add": adder(t)}, "github": codemode.Tools{}},
		Unavailable{Namespace: "github", Reason: "its command exited with status 1\nbefore completing the MCP handshake"})
	if err != nil {
		t.Fatal(err)
	}
	waitChanged()
	d := description()
	want := "## Unavailable tools\n\n"
	line := "- `tools.github`: its command exited with status 1 before completing the MCP handshake\n"
	if !strings.Contains(d, want) || !strings.HasSuffix(d, line) {
		t.Errorf("got description ending\n%s\nwant a section %q ending with %q", tail(d, 600), want, line)
	}
	if err := srv.SetTools(codemode.Tools{"math": codemode.Tools{"add": adder(t)}, "github": codemode.Tools{"echo": adder(t)}}); err != nil {
		t.Fatal(err)
	}
	waitChanged()
	if d := description(); strings.Contains(d, "Unavailable") || !strings.Contains(d, "github") {
		t.Errorf("got description\n%s\nwant github listed and no unavailable section", tail(d, 600))
	}
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
