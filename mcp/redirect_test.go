package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerLog is a loopback server that records the headers of every
// request it gets and answers 404.
type headerLog struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newHeaderLog(t *testing.T) *headerLog {
	t.Helper()
	h := &headerLog{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.Header.Clone())
		h.mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *headerLog) requests() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.seen...)
}

// TestRedirectToAnotherOriginRefused: a server that redirects to another
// origin (here: another port on the same host) is not followed, so the
// other origin never sees the configured headers, nor any request.
func TestRedirectToAnotherOriginRefused(t *testing.T) {
	other := newHeaderLog(t)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(origin.Close)
	for _, typ := range []string{TypeHTTP, TypeSSE, ""} {
		t.Run("type "+typ, func(t *testing.T) {
			cfg := &Config{Servers: map[string]UpstreamConfig{"moved": {Type: typ, URL: origin.URL + "/mcp",
				Headers: map[string]string{"Authorization": "Bearer redirect-secret-1", "X-Api-Key": "redirect-key-2"}}}}
			_, err := Connect(context.Background(), cfg, ClientOptions{ConnectTimeout: 5 * time.Second})
			if seen := other.requests(); len(seen) != 0 {
				t.Fatalf("got %d requests at the other origin (the first with Authorization %q), want none", len(seen), seen[0].Get("Authorization"))
			}
			if err == nil || !strings.Contains(err.Error(), "redirected to another origin, "+other.URL) {
				t.Fatalf("got %v, want a refused redirect naming %s", err, other.URL)
			}
		})
	}
}

// TestSameOriginRedirectFollowed: a redirect within the origin keeps
// working, with the headers.
func TestSameOriginRedirectFollowed(t *testing.T) {
	srv := newKit()
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/old":
			http.Redirect(w, r, "/mcp", http.StatusPermanentRedirect)
		case r.Header.Get("Authorization") != "Bearer same-origin-3":
			http.Error(w, "no token", http.StatusUnauthorized)
		default:
			h.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	up := connect(t, &Config{Servers: map[string]UpstreamConfig{"kit": {URL: ts.URL + "/old",
		Headers: map[string]string{"Authorization": "Bearer same-origin-3"}}}}, ClientOptions{})
	res, m := run(t, up.Tools(), codemode.Options{}, `return await tools.kit.echo({ via: "redirect" })`)
	mustOK(t, res)
	if got, _ := json.Marshal(m["value"]); string(got) != `{"via":"redirect"}` {
		t.Errorf("got %s, want {\"via\":\"redirect\"}", got)
	}
}

// TestSSEEndpointOnAnotherOrigin: an HTTP+SSE server that names another
// origin as the URL to post to gets no configured header there.
func TestSSEEndpointOnAnotherOrigin(t *testing.T) {
	other := newHeaderLog(t)
	done := make(chan struct{})
	sse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: endpoint\ndata: %s/messages?sessionid=1\n\n", other.URL)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(sse.Close)
	t.Cleanup(func() { close(done) }) // runs first: the stream ends, then the server
	cfg := &Config{Servers: map[string]UpstreamConfig{"sse": {Type: TypeSSE, URL: sse.URL,
		Headers: map[string]string{"Authorization": "Bearer sse-secret-4"}}}}
	if _, err := Connect(context.Background(), cfg, ClientOptions{ConnectTimeout: 5 * time.Second}); err == nil {
		t.Fatal("got a connection, want the other origin's 404 to fail it")
	}
	seen := other.requests()
	if len(seen) == 0 {
		t.Fatal("got no request at the other origin, want the initialize post")
	}
	for _, h := range seen {
		if got := h.Get("Authorization"); got != "" {
			t.Fatalf("got Authorization %q at the other origin, want none", got)
		}
	}
}
