package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
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
