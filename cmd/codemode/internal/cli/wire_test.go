package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// jsonObject parses one JSON-RPC message.
func jsonObject(t *testing.T, text string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("got %q, want a JSON object: %v", text, err)
	}
	return m
}

// wantRPCError checks that m is a JSON-RPC error response with the given
// id (nil: null) and code.
func wantRPCError(t *testing.T, what string, m map[string]any, id any, code float64) {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	gotID, hasID := m["id"]
	if m["jsonrpc"] != "2.0" || e == nil || e["code"] != code || !hasID || gotID != id {
		t.Errorf("%s: got %v, want a JSON-RPC error with id %v and code %v", what, m, id, code)
	}
}

const initialize20251125 = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestMCPStdioBadLines: codemode mcp on stdio answers each line that is
// not a JSON-RPC message with the JSON-RPC error for it and goes on
// serving; the end of its input still ends it with status 0.
func TestMCPStdioBadLines(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		code := runMCP(context.Background(), []string{"--cache-dir", engineCache}, inR, outW, stderr)
		outW.Close()
		exit <- code
	}()
	defer inW.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("the server stopped reading: %v\n%s", err, stderr)
		}
	}
	recv := func() map[string]any {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the server's output ended:\n%s", stderr)
			}
			return jsonObject(t, line)
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer within 30s:\n%s", stderr)
		}
		return nil
	}
	send(initialize20251125)
	if recv()["result"] == nil {
		t.Fatal("initialize failed")
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, tc := range []struct {
		line string
		id   any
		code float64
	}{
		{`{"jsonrpc":"2.0","id":2,"method":`, nil, -32700},
		{`{"id":3,"method":"tools/list"}`, 3.0, -32600},
		{`[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`, nil, -32600},
		{`"hello"`, nil, -32600},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/nonesuch"}`, 5.0, -32601},
	} {
		send(tc.line)
		wantRPCError(t, tc.line, recv(), tc.id, tc.code)
	}
	send(`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	m := recv()
	tools, _ := m["result"].(map[string]any)["tools"].([]any)
	if m["id"] != 6.0 || len(tools) != 1 {
		t.Errorf("got %v, want the tool list", m)
	}
	_ = inW.Close()
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("got exit %d at the end of input, want 0\n%s", code, stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the server did not stop at the end of its input")
	}
}

// failingWriter is a standard output that cannot be written.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestMCPStdioFatal: when standard output fails, the session cannot go on
// and the exit status says so.
func TestMCPStdioFatal(t *testing.T) {
	stderr := &syncBuffer{}
	in := strings.NewReader(initialize20251125 + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	inR, inW := io.Pipe() // stays open: only the failed write can end the session
	defer inW.Close()
	go func() { _, _ = io.Copy(inW, in) }()
	exit := make(chan int, 1)
	go func() {
		exit <- runMCP(context.Background(), []string{"--cache-dir", engineCache}, inR, failingWriter{}, stderr)
	}()
	select {
	case code := <-exit:
		if code != exitFailure || !strings.Contains(stderr.String(), "broken pipe") {
			t.Errorf("got exit %d, want %d and the error logged\n%s", code, exitFailure, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the server went on with a broken standard output:\n%s", stderr)
	}
}

// postRaw posts body to url in session (none when empty) and returns the
// status, the session id sent back, and the body, the data of its last
// event when it is an event stream.
func postRaw(t *testing.T, url, session, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	text := string(b)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		text = ""
		for line := range strings.Lines(string(b)) {
			if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && d != "" {
				text = d
			}
		}
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), text
}

// TestMCPHTTPErrors: over streamable HTTP, malformed bodies get 400 with
// -32700 or -32600, a call of an unknown method -32601 as its answer, a
// request other than initialize without a session 400 with a JSON-RPC
// error; the session serves on, and the go-sdk client is unaffected.
func TestMCPHTTPErrors(t *testing.T) {
	url := startHTTP(t)
	status, session, body := postRaw(t, url, "", initialize20251125)
	if status != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %q %s", status, session, body)
	}
	if status, _, body := postRaw(t, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, body)
	}
	for _, tc := range []struct {
		session, body string
		status        int
		id            any
		code          float64
	}{
		{session, `{"jsonrpc":"2.0","id":2,`, http.StatusBadRequest, nil, -32700},
		{session, `{"id":3,"method":"tools/list"}`, http.StatusBadRequest, 3.0, -32600},
		{session, `[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`, http.StatusBadRequest, nil, -32600},
		{session, `{"jsonrpc":"2.0","id":5,"method":"tools/nonesuch"}`, http.StatusOK, 5.0, -32601},
		{"", `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`, http.StatusBadRequest, 6.0, -32600},
	} {
		status, _, body := postRaw(t, url, tc.session, tc.body)
		if status != tc.status {
			t.Errorf("%s: got status %d, want %d", tc.body, status, tc.status)
		}
		wantRPCError(t, tc.body, jsonObject(t, body), tc.id, tc.code)
	}
	status, _, body = postRaw(t, url, session, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	m := jsonObject(t, body)
	tools, _ := m["result"].(map[string]any)["tools"].([]any)
	if status != http.StatusOK || m["id"] != 7.0 || len(tools) != 1 {
		t.Errorf("got %d %s, want the tool list", status, body)
	}

	// The go-sdk client, which tries the sessionless server/discover
	// first and falls back to initialize, works as before.
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if isErr, v := callExecute(t, cs, `return 6 * 7`); isErr || v["value"] != 42.0 {
		t.Errorf("result = %v", v)
	}
}

// cutter is a TCP proxy that can cut every connection through it, and
// notes whether a request resumed a stream (Last-Event-ID).
type cutter struct {
	ln      net.Listener
	target  string
	primed  chan struct{} // a priming event went to the client
	mu      sync.Mutex
	conns   []net.Conn
	resumed bool
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target, primed: make(chan struct{}, 100)}
	t.Cleanup(func() {
		_ = ln.Close()
		c.cut()
	})
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, client, server)
			c.mu.Unlock()
			go c.pipe(server, client, func(b []byte) {
				if bytes.Contains(bytes.ToLower(b), []byte("last-event-id:")) {
					c.mu.Lock()
					c.resumed = true
					c.mu.Unlock()
				}
			})
			go c.pipe(client, server, func(b []byte) {
				if bytes.Contains(b, []byte("event: prime")) {
					c.primed <- struct{}{}
				}
			})
		}
	}()
	return c
}

// pipe copies from src to dst, showing each chunk to see.
func (c *cutter) pipe(dst, src net.Conn, see func([]byte)) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			see(buf[:n])
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// cut closes every connection open through the proxy.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// TestMCPHTTPResume: the connection of a call is cut while its program
// runs; the go-sdk client reconnects with Last-Event-ID (the server's
// event store has given the stream ids, starting with a priming event)
// and gets the result it would have lost.
func TestMCPHTTPResume(t *testing.T) {
	url := startHTTP(t)
	host := strings.TrimPrefix(url, "http://")
	host = host[:strings.Index(host, "/")]
	proxy := newCutter(t, host)
	// The client dials the proxy but names the server in Host, which the
	// server's DNS-rebinding guard checks.
	dialer := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, proxy.ln.Addr().String())
	}}}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for len(proxy.primed) > 0 { // from before the call
		<-proxy.primed
	}
	type answer struct {
		res *mcpsdk.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute",
			Arguments: map[string]any{"code": `await new Promise((r) => setTimeout(r, 1500)); return 42`}})
		done <- answer{res, err}
	}()
	select {
	case <-proxy.primed: // the call's stream has begun: cut it
	case <-time.After(30 * time.Second):
		t.Fatal("the call's event stream did not begin with a priming event")
	}
	proxy.cut()
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatalf("the call failed after its connection was cut: %v", a.err)
		}
		var v map[string]any
		b, _ := json.Marshal(a.res.StructuredContent)
		_ = json.Unmarshal(b, &v)
		if a.res.IsError || v["value"] != 42.0 {
			t.Errorf("got %s, want the value 42", b)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no result within 60s of the cut")
	}
	proxy.mu.Lock()
	resumed := proxy.resumed
	proxy.mu.Unlock()
	if !resumed {
		t.Error("the client got its result without resuming with Last-Event-ID: the cut came too late to test anything")
	}
}
