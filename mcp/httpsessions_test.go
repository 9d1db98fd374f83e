package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpClient connects a go-sdk client to url over streamable HTTP.
func httpClient(t *testing.T, url string) *mcpsdk.ClientSession {
	t.Helper()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// execHTTP calls execute and returns its structured result, failing the
// test when the call itself fails.
func execHTTP(t *testing.T, cs *mcpsdk.ClientSession, code string) map[string]any {
	t.Helper()
	v, err := tryExec(cs, code)
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return v
}

func tryExec(cs *mcpsdk.ClientSession, code string) (map[string]any, error) {
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": code}})
	if err != nil {
		return nil, err
	}
	var v map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// errorMessage is a failed result's error message, "" for none.
func errorMessage(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

const rawPing = `{"jsonrpc":"2.0","id":7,"method":"ping"}`

// eventually polls cond for up to 20s; not a timing assertion, a bound
// on a wait for something that must happen.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s did not happen within 20s", what)
}

// settle waits until the handler h has seen every request of its sessions
// end (a client reads its answer before the handler returns) and, with
// streams, every session's event stream open: what decides evictions.
func settle(t *testing.T, h http.Handler, streams bool) {
	t.Helper()
	hs := h.(*httpSessions)
	eventually(t, "the sessions settling", func() bool {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		for _, e := range hs.sessions {
			if e.posts > 0 || (streams && e.streams == 0) {
				return false
			}
		}
		return true
	})
}

// TestHTTPSessionEvictsLRU: at the session cap, a new session takes the
// place of the least recently used idle one, whose client then gets 404;
// sessions that never had a request go first.
func TestHTTPSessionEvictsLRU(t *testing.T) {
	logger, logs := newLogRecorder()
	srv := newServerWith(t, ServerOptions{Logger: logger, MaxSessions: 2, Runtime: codemode.Options{Timeout: 20 * time.Second}})
	h := srv.HTTPHandler()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)

	a, b := httpClient(t, ts.URL), httpClient(t, ts.URL)
	execHTTP(t, a, "return 1")
	settle(t, h, true)
	execHTTP(t, b, "return 2") // b is the more recently used
	settle(t, h, true)
	c := httpClient(t, ts.URL) // takes a's place
	if v := execHTTP(t, c, "return 3"); v["value"] != 3.0 {
		t.Errorf("new session: got %v", v)
	}
	if v := execHTTP(t, b, "return 4"); v["value"] != 4.0 {
		t.Errorf("kept session: got %v", v)
	}
	if status, _, _ := rawPost(t, ts.URL, a.ID(), rawPing); status != http.StatusNotFound {
		t.Errorf("evicted session: got status %d, want 404", status)
	}
	if _, err := tryExec(a, "return 5"); err == nil {
		t.Error("evicted session: got a result, want an error")
	}
	eventually(t, "two sessions left", func() bool { return sessionCount(srv) == 2 })
	if !strings.Contains(logs(), "closed the least recently used idle HTTP session") {
		t.Errorf("the eviction is not logged:\n%s", logs())
	}

	// A session with no request since it was initialized goes before a
	// used one, even a less recently used one. (Raw sessions hold no
	// event stream, so that rule does not decide here.)
	srv2 := newServerWith(t, ServerOptions{MaxSessions: 2})
	h2 := srv2.HTTPHandler()
	ts2 := httptest.NewServer(h2)
	t.Cleanup(ts2.Close)
	_, used, _ := rawInitialize(t, ts2.URL)
	if status, _, body := rawPost(t, ts2.URL, used, rawPing); status != http.StatusOK {
		t.Fatalf("ping: %d %s", status, body)
	}
	_, unused, _ := rawInitialize(t, ts2.URL)
	settle(t, h2, false)
	if status, third, body := rawInitialize(t, ts2.URL); status != http.StatusOK || third == "" {
		t.Fatalf("third session: %d %s", status, body)
	}
	if status, _, _ := rawPost(t, ts2.URL, unused, rawPing); status != http.StatusNotFound {
		t.Errorf("unused session: got status %d, want 404 (evicted)", status)
	}
	if status, _, _ := rawPost(t, ts2.URL, used, rawPing); status != http.StatusOK {
		t.Errorf("used session: got status %d, want 200 (kept)", status)
	}
}

// TestHTTPSessionBusyNotEvicted: sessions with a run in flight are not
// evicted; with every session busy a new one is refused with 503 and a
// JSON-RPC error, logged once however often it happens; once a run ends
// its session can be evicted again.
func TestHTTPSessionBusyNotEvicted(t *testing.T) {
	started := make(chan string, 8)
	g := &gates{}
	logger, logs := newLogRecorder()
	srv := newServerWith(t, ServerOptions{Logger: logger, MaxSessions: 2, Runtime: codemode.Options{
		Timeout: 60 * time.Second, Tools: codemode.Tools{"t": codemode.Tools{"block": blocker(started, g)}}}})
	h := srv.HTTPHandler()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	defer g.openAll()

	a, b := httpClient(t, ts.URL), httpClient(t, ts.URL)
	done := map[string]chan error{}
	for who, cs := range map[string]*mcpsdk.ClientSession{"a": a, "b": b} {
		done[who] = make(chan error, 1)
		go func() {
			_, err := tryExec(cs, `return await tools.t.block({ who: "`+who+`" })`)
			done[who] <- err
		}()
	}
	<-started
	<-started

	status, id, body := rawInitialize(t, ts.URL)
	if status != http.StatusServiceUnavailable || id != "" {
		t.Fatalf("got status %d, session %q; want 503 and none", status, id)
	}
	var msg struct {
		JSONRPC string
		ID      any
		Error   struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil || msg.JSONRPC != "2.0" || msg.ID != 1.0 ||
		msg.Error.Code != codeServerBusy || !strings.Contains(msg.Error.Message, "limit of 2 sessions") {
		t.Errorf("got body %s (%v), want a JSON-RPC error for id 1 naming the limit", body, err)
	}
	_, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, nil)
	if err == nil || !strings.Contains(err.Error(), "Service Unavailable") {
		t.Errorf("got client error %v, want Service Unavailable", err)
	}
	// What the go-sdk client shows of the refusal.
	t.Logf("go-sdk client error: %v", err)
	if n := strings.Count(logs(), "refused a new HTTP session"); n != 1 {
		t.Errorf("got %d log lines for 2 refusals within 10s, want 1:\n%s", n, logs())
	}

	g.open("a")
	if err := <-done["a"]; err != nil {
		t.Fatal(err)
	}
	hs := h.(*httpSessions)
	eventually(t, "a's request ending", func() bool {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		return hs.sessions[a.ID()].posts == 0
	})
	c := httpClient(t, ts.URL) // a is idle now: c takes its place
	execHTTP(t, c, "return 1")
	if status, _, _ := rawPost(t, ts.URL, a.ID(), rawPing); status != http.StatusNotFound {
		t.Errorf("idle session a: got status %d, want 404", status)
	}
	g.open("b")
	if err := <-done["b"]; err != nil {
		t.Errorf("busy session b's run: %v", err)
	}
}

// TestHTTPSessionUnusedExpiresSooner: a session without a request since
// its initialization expires after the fresh timeout, a used one after
// the idle timeout, and one with a run in flight not at all.
func TestHTTPSessionUnusedExpiresSooner(t *testing.T) {
	started := make(chan string, 8)
	g := &gates{}
	srv := newServerWith(t, ServerOptions{SessionIdleTimeout: time.Hour, Runtime: codemode.Options{
		Timeout: 60 * time.Second, Tools: codemode.Tools{"t": codemode.Tools{"block": blocker(started, g)}}}})
	srv.freshTimeout = 200 * time.Millisecond
	ts := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(ts.Close)
	defer g.openAll()

	used := httpClient(t, ts.URL)
	execHTTP(t, used, "return 1")
	_, unused, _ := rawInitialize(t, ts.URL)
	eventually(t, "the unused session's expiry", func() bool { return srv.session(unused) == nil })
	if status, _, _ := rawPost(t, ts.URL, unused, rawPing); status != http.StatusNotFound {
		t.Errorf("expired session: got status %d, want 404", status)
	}
	if srv.session(used.ID()) == nil {
		t.Error("the used session expired with it")
	}
	execHTTP(t, used, "return 2")

	// Idle timeout short, a run outlasting it: the session stays.
	srv2 := newServerWith(t, ServerOptions{SessionIdleTimeout: 200 * time.Millisecond, Runtime: codemode.Options{
		Timeout: 60 * time.Second, Tools: codemode.Tools{"t": codemode.Tools{"block": blocker(started, g)}}}})
	ts2 := httptest.NewServer(srv2.HTTPHandler())
	t.Cleanup(ts2.Close)
	busy := httpClient(t, ts2.URL)
	done := make(chan map[string]any, 1)
	go func() {
		v, _ := tryExec(busy, `return await tools.t.block({ who: "long" })`)
		done <- v
	}()
	<-started
	time.Sleep(time.Second) // gives a broken expiry the chance to show
	if srv2.session(busy.ID()) == nil {
		t.Error("the session expired with its run in flight")
	}
	g.open("long")
	if v := <-done; v["value"] != "released" {
		t.Errorf("got %v, want the run's value", v)
	}
}
