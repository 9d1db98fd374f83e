package openapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
)

// convert converts a spec or fails the test.
func convert(t testing.TB, spec string, opts Options) *API {
	t.Helper()
	api, err := FromSpec([]byte(spec), opts)
	if err != nil {
		t.Fatalf("FromSpec: %v", err)
	}
	return api
}

// lookup finds a tool by its dotted path.
func lookup(t testing.TB, tools codemode.Tools, path string) codemode.Tool {
	t.Helper()
	var node any = tools
	for _, seg := range strings.Split(path, ".") {
		m, ok := node.(codemode.Tools)
		if !ok {
			t.Fatalf("%s: %q is not a namespace", path, seg)
		}
		if node, ok = m[seg]; !ok {
			t.Fatalf("no tool %s (have %v)", path, keys(m))
		}
	}
	tool, ok := node.(codemode.Tool)
	if !ok {
		t.Fatalf("%s is a %T, not a tool", path, node)
	}
	return tool
}

func keys(m codemode.Tools) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// countTools counts the tools of a tree.
func countTools(t codemode.Tools) int {
	n := 0
	for _, v := range t {
		switch x := v.(type) {
		case codemode.Tool:
			n++
		case codemode.Tools:
			n += countTools(x)
		}
	}
	return n
}

// execute runs a program with api's tools mounted as tools.api, recording
// the host-side errors of the tool calls.
func execute(t testing.TB, api *API, timeout time.Duration, program string) (codemode.Result, []error) {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	rt, err := codemode.New(codemode.Options{
		Tools:   codemode.Tools{"api": api.Tools},
		Timeout: timeout,
		OnToolCallEnd: func(_ context.Context, e codemode.CallEnd) {
			if e.Err != nil {
				mu.Lock()
				errs = append(errs, e.Err)
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatalf("codemode.New: %v", err)
	}
	defer rt.Close()
	res, err := rt.Execute(context.Background(), program)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return res, errs
}

// value runs a program that must succeed and decodes its value.
func value(t testing.TB, api *API, program string) any {
	t.Helper()
	res, _ := execute(t, api, 10*time.Second, program)
	if !res.OK {
		t.Fatalf("program failed: %s: %s", res.Error.Kind, res.Error.Message)
	}
	var v any
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// call invokes a tool's Run directly.
func call(t testing.TB, api *API, path, input string) (any, error) {
	t.Helper()
	return lookup(t, api.Tools, path).Run(context.Background(), json.RawMessage(input))
}

// recorded is what a test server saw of one request.
type recorded struct {
	Method, Path, RawPath, RawQuery string
	Header                          http.Header
	Body                            string
}

// recorder is a loopback server that records requests and answers with
// respond (or {"ok":true}).
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newRecorder(t testing.TB, respond http.HandlerFunc) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body strings.Builder
		if req.Body != nil {
			buf := make([]byte, 1<<16)
			for {
				n, err := req.Body.Read(buf)
				body.Write(buf[:n])
				if err != nil {
					break
				}
			}
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{req.Method, req.URL.Path, req.URL.EscapedPath(), req.URL.RawQuery, req.Header.Clone(), body.String()})
		r.mu.Unlock()
		if respond != nil {
			respond(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(r.Close)
	return r
}

// last returns the last recorded request.
func (r *recorder) last(t testing.TB) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("the server saw no request")
	}
	return r.reqs[len(r.reqs)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// schemaJSON marshals a tool's input schema for assertions.
func schemaJSON(t testing.TB, tool codemode.Tool) string {
	t.Helper()
	b, err := json.Marshal(tool.Input)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
