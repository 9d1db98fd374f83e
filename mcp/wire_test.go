package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
)

// rawStdio runs srv on a stdio transport whose lines may be limit bytes
// long, over pipes, and returns a function that sends one line and one
// that reads the next message the server writes.
func rawStdio(t *testing.T, srv *Server, limit int) (send func(string), recv func() string, closeIn func() error, done <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ended := make(chan error, 1)
	go func() {
		ended <- srv.MCP().Run(context.Background(), stdioTransport(inR, outW, limit))
		_ = outW.Close()
	}()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send = func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("writing %q: %v", line, err)
		}
	}
	recv = func() string {
		t.Helper()
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the server's output ended")
			}
			return line
		case <-time.After(20 * time.Second):
			t.Fatal("no reply within 20s")
		}
		return ""
	}
	t.Cleanup(func() { _ = inW.Close() })
	return send, recv, inW.Close, ended
}

// object parses one message the server wrote.
func object(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("the server wrote %q: %v", line, err)
	}
	return m
}

// errorOf checks that m is a JSON-RPC error response with the given id
// (nil: null) and code.
func errorOf(t *testing.T, m map[string]any, id any, code float64) {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	gotID, hasID := m["id"]
	if m["jsonrpc"] != "2.0" || e == nil || e["code"] != code || !hasID || gotID != id {
		t.Errorf("got %v, want a JSON-RPC error with id %v and code %v", m, id, code)
	}
}

func initializeLine(version string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
}

// TestStdioBadLines: each line the SDK's reader could not take gets the
// JSON-RPC error for it (id null when it cannot be read) and the session
// goes on: a tools/list after them is answered, and the end of input
// ends the session without an error.
func TestStdioBadLines(t *testing.T) {
	srv := newServer(t, nil, codemode.Options{})
	send, recv, closeIn, done := rawStdio(t, srv, 256)
	send(initializeLine("2025-11-25"))
	if res, _ := object(t, recv())["result"].(map[string]any); res == nil || res["protocolVersion"] != "2025-11-25" {
		t.Fatalf("initialize failed")
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, tc := range []struct {
		line string
		id   any
		code float64
	}{
		{`not json`, nil, -32700},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list"`, nil, -32700},
		{`{"id":3,"method":"tools/list"}`, 3.0, -32600},                   // no "jsonrpc":"2.0"
		{`{"jsonrpc":"1.0","id":"four","method":"ping"}`, "four", -32600}, // the wrong version
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, nil, -32600},      // an id of the wrong type
		{`{"jsonrpc":"2.0","id":5,"method":7}`, 5.0, -32600},              // a method that is not a string
		{`42`, nil, -32600},
		{`[{"jsonrpc":"2.0","id":6,"method":"tools/list"}]`, nil, -32600}, // no batches since 2025-06-18
		{`[]`, nil, -32600},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":"` + strings.Repeat("x", 300) + `"}`, nil, -32600}, // too long
		{`{"jsonrpc":"2.0","id":8,"method":"no/such"}`, 8.0, -32601},                                                // answered by the SDK
	} {
		send(tc.line)
		errorOf(t, object(t, recv()), tc.id, tc.code)
	}
	// A blank line is skipped, and an answer to no request dropped (by
	// the SDK); neither gets a reply.
	send("")
	send(`{"jsonrpc":"2.0","id":99,"result":{}}`)
	send(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	m := object(t, recv())
	tools, _ := m["result"].(map[string]any)["tools"].([]any)
	if m["id"] != 9.0 || len(tools) != 1 || tools[0].(map[string]any)["name"] != ExecuteTool {
		t.Errorf("got %v, want the tool list", m)
	}
	_ = closeIn()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the session ended with %v, want no error at the end of input", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end with its input")
	}
}

// TestStdioBatchesBefore20250618: a client on an older protocol version
// still gets its batches served, and a bad element refuses the batch
// without ending the session.
func TestStdioBatchesBefore20250618(t *testing.T) {
	srv := newServer(t, nil, codemode.Options{})
	send, recv, _, _ := rawStdio(t, srv, maxStdioLine)
	send(initializeLine("2025-03-26"))
	if res, _ := object(t, recv())["result"].(map[string]any); res == nil || res["protocolVersion"] != "2025-03-26" {
		t.Fatalf("initialize failed")
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`[{"jsonrpc":"2.0","id":2,"method":"ping"},{"id":3,"method":"ping"}]`)
	errorOf(t, object(t, recv()), nil, -32600)
	send(`[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	errorOf(t, object(t, recv()), nil, -32600)
	send(`[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"tools/list"}]`)
	var batch []map[string]any
	if line := recv(); json.Unmarshal([]byte(line), &batch) != nil || len(batch) != 2 || batch[0]["id"] != 4.0 || batch[1]["result"] == nil {
		t.Errorf("got %s, want the batch's two answers", line)
	}
}

// rawPost posts body to url as an MCP client would, in session (none when
// empty), and returns the status, the session id sent back and the body.
func rawPost(t *testing.T, url, session, body string) (int, string, string) {
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
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

// sseMessage returns the data of the last message event of an event
// stream, or body itself when it is not one.
func sseMessage(body string) string {
	var data string
	for line := range strings.Lines(body) {
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok && d != "" {
			data = d
		}
	}
	if data == "" {
		return body
	}
	return data
}

// TestHTTPErrors: over streamable HTTP, malformed bodies, unknown
// methods and requests without a session get JSON-RPC errors with the
// right codes and statuses, and the session goes on serving.
func TestHTTPErrors(t *testing.T) {
	srv := newServer(t, nil, codemode.Options{})
	ts := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(ts.Close)
	status, session, body := rawPost(t, ts.URL, "", initializeLine("2025-11-25"))
	if status != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %q %s", status, session, body)
	}
	if status, _, body := rawPost(t, ts.URL, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, body)
	}
	for _, tc := range []struct {
		session, body string
		status        int
		id            any
		code          float64
	}{
		{session, `not json`, 400, nil, -32700},
		{session, ``, 400, nil, -32700},
		{session, `{"id":3,"method":"tools/list"}`, 400, 3.0, -32600},
		{session, `[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`, 400, nil, -32600},
		{session, `{"jsonrpc":"2.0","id":5,"method":"no/such"}`, 200, 5.0, -32601},
		{session, `{"jsonrpc":"2.0","method":"notifications/no/such"}`, 400, nil, -32601},
		{session, `{"jsonrpc":"2.0","id":6,"method":"tools/call"}`, 400, 6.0, -32600}, // no params
		{"", `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, 400, 7.0, -32600},      // no session
		{"", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 400, nil, -32600},
	} {
		status, _, body := rawPost(t, ts.URL, tc.session, tc.body)
		if status != tc.status {
			t.Errorf("%s: got status %d, want %d", tc.body, status, tc.status)
		}
		errorOf(t, object(t, sseMessage(body)), tc.id, tc.code)
	}
	status, _, body = rawPost(t, ts.URL, session, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	m := object(t, sseMessage(body))
	tools, _ := m["result"].(map[string]any)["tools"].([]any)
	if status != http.StatusOK || m["id"] != 9.0 || len(tools) != 1 {
		t.Errorf("got %d %s, want the tool list", status, body)
	}
	if n := sessionCount(srv); n != 1 {
		t.Errorf("got %d sessions, want the one (a request without a session opens none)", n)
	}
}
