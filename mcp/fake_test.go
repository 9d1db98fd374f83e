package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as a stdio MCP server ("the kit"): with
// fakeServerEnv set it serves instead of running tests. A real process is
// what the crash and kill tests need.
const fakeServerEnv = "CODEMODE_MCP_FAKE_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeServerEnv); mode != "" {
		switch mode {
		case "exit":
			os.Exit(7) // a server that dies before the handshake
		case "once":
			// Serves the first time only: later starts die, as a server
			// whose dependency went away would.
			marker := os.Getenv(fakeServerEnv + "_MARKER")
			if _, err := os.Stat(marker); err == nil {
				os.Exit(7)
			}
			_ = os.WriteFile(marker, nil, 0o644)
		case "late":
			// Fails until its marker exists, as a server whose
			// dependency comes up after it would.
			if _, err := os.Stat(os.Getenv(fakeServerEnv + "_MARKER")); err != nil {
				fmt.Fprintln(os.Stderr, "kit: not ready: the marker file is missing")
				os.Exit(1)
			}
		}
		srv := newKit()
		switch mode {
		case "leak":
			addLeak(srv)
		case "spoof":
			addSpoofs(srv)
		}
		if err := srv.Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "kit:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// kitConfig runs the test binary as the kit over stdio.
func kitConfig(t *testing.T, env map[string]string) UpstreamConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := map[string]string{fakeServerEnv: "1"}
	for k, v := range env {
		e[k] = v
	}
	return UpstreamConfig{Command: exe, Args: []string{"-test.run=^$"}, Env: e}
}

// kitState is shared by the kit's handlers.
type kitState struct {
	cancelled atomic.Int64
	added     atomic.Int64
}

// newKit builds the kit: tools covering every result shape, the failure
// modes, odd names and schemas, and a page size small enough that
// tools/list needs several pages.
func newKit() *mcpsdk.Server {
	st := &kitState{}
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "kit", Version: "1"}, &mcpsdk.ServerOptions{PageSize: 3})
	obj := json.RawMessage(`{"type":"object"}`)
	text := func(s ...string) *mcpsdk.CallToolResult {
		r := &mcpsdk.CallToolResult{}
		for _, x := range s {
			r.Content = append(r.Content, &mcpsdk.TextContent{Text: x})
		}
		return r
	}
	add := func(name, desc string, schema json.RawMessage, h func(ctx context.Context, args map[string]any) (*mcpsdk.CallToolResult, error)) {
		srv.AddTool(&mcpsdk.Tool{Name: name, Description: desc, InputSchema: schema}, func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			var args map[string]any
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return h(ctx, args)
		})
	}
	add("echo", "Returns its arguments as JSON text.", json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}}}`),
		func(_ context.Context, args map[string]any) (*mcpsdk.CallToolResult, error) {
			b, _ := json.Marshal(args)
			return text(string(b)), nil
		})
	add("text", "Plain text.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return text("plain <text> & more"), nil
	})
	add("number_text", "A number as text.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return text("12345678901234567890"), nil
	})
	add("multi", "Two text blocks.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return text("first", `{"second":2}`), nil
	})
	add("empty", "No content.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return &mcpsdk.CallToolResult{}, nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "structured", Description: "Structured content.", InputSchema: obj,
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"total":{"type":"integer"}}}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "ignored"}},
				StructuredContent: map[string]any{"total": 3, "items": []string{"a", "b", "c"}}}, nil
		})
	add("media", "An image, a big audio clip, resources and a link.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		size := int64(42)
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3}},
			&mcpsdk.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 100_000)},
			&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///a.txt", MIMEType: "text/plain", Text: "hello"}},
			&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "file:///b.bin", Blob: []byte{9, 9}}},
			&mcpsdk.ResourceLink{URI: "file:///c", Name: "c", Size: &size},
		}}, nil
	})
	add("fail", "Fails with isError.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		r := text("\x1b[31mno such order\x1b[0m\x07 o-9\r\n" + strings.Repeat("x", 3000))
		r.IsError = true
		return r, nil
	})
	add("rpc_error", "Fails with a JSON-RPC error.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad widget id"}
	})
	add("weird/name.x", "A name that is no identifier.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return text("weird ok"), nil
	})
	add("then", "A name the tools proxy keeps.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return text("then ok"), nil
	})
	add("bad_schema", "Its input schema does not decode.", json.RawMessage(`{"type":"object","properties":{"x":{"type":12}}}`),
		func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
			return text("bad schema ok"), nil
		})
	add("bad_properties", "Its properties are an array.", json.RawMessage(`{"type":"object","properties":[1,2]}`),
		func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
			return text("bad properties ok"), nil
		})
	add("sleep", "Sleeps for ms milliseconds.", json.RawMessage(`{"type":"object","properties":{"ms":{"type":"number"}}}`),
		func(ctx context.Context, args map[string]any) (*mcpsdk.CallToolResult, error) {
			ms, _ := args["ms"].(float64)
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return text(fmt.Sprint(ms)), nil
			case <-ctx.Done():
				st.cancelled.Add(1)
				return nil, ctx.Err()
			}
		})
	add("hang", "Never answers; counts its cancellations.", obj, func(ctx context.Context, args map[string]any) (*mcpsdk.CallToolResult, error) {
		if f, _ := args["pidFile"].(string); f != "" {
			_ = os.WriteFile(f, []byte(fmt.Sprint(os.Getpid())), 0o644)
		}
		<-ctx.Done()
		st.cancelled.Add(1)
		return nil, ctx.Err()
	})
	add("cancelled", "How many calls were cancelled.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		return text(fmt.Sprint(st.cancelled.Load())), nil
	})
	add("crash", "Exits mid-call.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	add("env", "The environment.", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		m := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return text(string(b)), nil
	})
	add("add_tool", "Adds a tool (list_changed).", obj, func(context.Context, map[string]any) (*mcpsdk.CallToolResult, error) {
		n := st.added.Add(1)
		name := fmt.Sprintf("added_%d", n)
		srv.AddTool(&mcpsdk.Tool{Name: name, Description: "Added later.", InputSchema: obj},
			func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				return text(name + " ok"), nil
			})
		return text(name), nil
	})
	return srv
}

// httpKit serves the kit over streamable HTTP (or SSE), optionally
// checking each request.
func httpKit(t *testing.T, sse bool, check func(*http.Request) error) string {
	t.Helper()
	srv := newKit()
	var h http.Handler
	if sse {
		h = mcpsdk.NewSSEHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	} else {
		h = mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if check != nil {
			if err := check(r); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// logRecorder is a slog handler keeping records for assertions.
type logRecorder struct {
	mu   chan struct{}
	recs *[]string
}

func newLogRecorder() (*slog.Logger, func() string) {
	recs := &[]string{}
	h := &logRecorder{mu: make(chan struct{}, 1), recs: recs}
	return slog.New(h), func() string {
		h.mu <- struct{}{}
		defer func() { <-h.mu }()
		return strings.Join(*recs, "\n")
	}
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	h.mu <- struct{}{}
	*h.recs = append(*h.recs, b.String())
	<-h.mu
	return nil
}
func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &attrHandler{h, as}
}
func (h *logRecorder) WithGroup(string) slog.Handler { return h }

type attrHandler struct {
	*logRecorder
	attrs []slog.Attr
}

func (h *attrHandler) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(h.attrs...)
	return h.logRecorder.Handle(ctx, r)
}
func (h *attrHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &attrHandler{h.logRecorder, append(append([]slog.Attr(nil), h.attrs...), as...)}
}
