package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codemode-go/codemode/mcp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mainEnv makes the test binary run "codemode mcp", so a real MCP client
// (the inspector) can start it; argsEnv holds the arguments as a JSON
// array, out of reach of the client's own flag parsing. Both are checked
// in init, before the testing package parses flags.
const (
	mainEnv = "CODEMODE_TEST_MCP_MAIN"
	argsEnv = "CODEMODE_TEST_MCP_ARGS"
)

func init() {
	if os.Getenv(mainEnv) == "1" {
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv(argsEnv)), &args); err != nil {
			os.Exit(exitUsage)
		}
		os.Exit(mcpCmd(args, os.Stdin, os.Stdout, os.Stderr))
	}
}

// syncBuffer is a bytes.Buffer safe to read while the server writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// engineCache is shared by the tests' servers so the engine compiles once.
var engineCache = filepath.Join(os.TempDir(), "codemode-mcp-test-cache")

func TestMCPUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"mcpServers": {"x": {"command": "a", "url": "http://b"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(tokenEnv, testToken)
	t.Setenv("CODEMODE_TEST_SHORT_TOKEN", "0123456789")
	t.Setenv("CODEMODE_TEST_NO_TOKEN", "")
	const remote = "not a loopback address"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nope"}, "unknown flag --nope"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--config", bad}, `server "x": has both a command and a url`},
		{[]string{"--config", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--timeout", "-1s"}, "must not be negative"},
		{[]string{"--max-memory", "1KiB", "--cache-dir", engineCache}, "--max-memory 1 KiB is outside 1 MiB to 2 GiB"},
		{[]string{"--timeout", "30"}, `"30" has no unit: write 30s`},
		{[]string{"--max-runs", "-1"}, "--max-runs must not be negative"},
		// Every interface, another host's address, or a name that could
		// resolve anywhere: refused without --http-allow-remote and a token.
		{[]string{"--http", "0.0.0.0:0"}, remote},
		{[]string{"--http", ":0"}, remote},
		{[]string{"--http", "[::]:0"}, remote},
		{[]string{"--http", "192.0.2.1:8080"}, remote},
		{[]string{"--http", "example.com:8080"}, remote},
		{[]string{"--http", "0.0.0.0:0", "--http-allow-remote"}, remote},
		{[]string{"--http", "0.0.0.0:0", "--http-token-env", tokenEnv}, remote},
		{[]string{"--http", "0.0.0.0:0", "--http-allow-remote", "--http-token-env", "CODEMODE_TEST_NO_TOKEN"}, "CODEMODE_TEST_NO_TOKEN is empty or unset"},
		{[]string{"--http", "127.0.0.1:0", "--http-token-env", "CODEMODE_TEST_SHORT_TOKEN"}, "shorter than 16 bytes"},
		{[]string{"--http", "127.0.0.1"}, "want host:port"},
		{[]string{"--http", "127.0.0.1:0", "--http-max-sessions", "-1"}, "must not be negative"},
		{[]string{"--http-allow-remote", "--http-token-env", tokenEnv}, "--http-allow-remote, --http-token-env apply only with --http"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runMCP(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
			if code != exitUsage || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("got exit %d, stderr %q; want exit %d and %q", code, errb.String(), exitUsage, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("got stdout %q, want nothing", out.String())
			}
		})
	}
	var out, errb bytes.Buffer
	if code := runMCP(context.Background(), []string{"-h"}, strings.NewReader(""), &out, &errb); code != exitOK {
		t.Errorf("-h: got exit %d, want %d", code, exitOK)
	}
	for _, want := range []string{"-max-tool-calls", "-max-runs", "-http-allow-remote", "-http-token-env NAME", "-http-max-sessions", "-http-idle-timeout", "DNS rebinding"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("-h lacks %q:\n%s", want, errb.String())
		}
	}
}

// tokenEnv names the environment variable holding testToken.
const (
	tokenEnv  = "CODEMODE_TEST_HTTP_TOKEN"
	testToken = "s3cret-token-for-tests-0123456789"
)

// startStdio runs the command on pipes and connects a go-sdk client.
func startStdio(t *testing.T, ctx context.Context, args ...string) (*mcpsdk.ClientSession, *syncBuffer, <-chan int) {
	t.Helper()
	cs, stderr, exit, _ := startStdioPipe(t, ctx, args...)
	return cs, stderr, exit
}

// startStdioPipe is startStdio that also returns the server's input, to
// cut it as a client that dies would.
func startStdioPipe(t *testing.T, ctx context.Context, args ...string) (*mcpsdk.ClientSession, *syncBuffer, <-chan int, io.Closer) {
	t.Helper()
	return startStdioClient(t, ctx, nil, args...)
}

// startStdioClient is startStdioPipe with the client's options.
func startStdioClient(t *testing.T, ctx context.Context, copts *mcpsdk.ClientOptions, args ...string) (*mcpsdk.ClientSession, *syncBuffer, <-chan int, io.Closer) {
	t.Helper()
	return startStdioCommand(t, ctx, "mcp", copts, args...)
}

// startStdioAs is startStdio for codemode mcp or codemode serve (name).
func startStdioAs(t *testing.T, ctx context.Context, name string, args ...string) (*mcpsdk.ClientSession, *syncBuffer, <-chan int) {
	t.Helper()
	cs, stderr, exit, _ := startStdioCommand(t, ctx, name, nil, args...)
	return cs, stderr, exit
}

func startStdioCommand(t *testing.T, ctx context.Context, name string, copts *mcpsdk.ClientOptions, args ...string) (*mcpsdk.ClientSession, *syncBuffer, <-chan int, io.Closer) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &syncBuffer{}
	exit := make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		code := runMCPAs(ctx, name, append([]string{"--cache-dir", engineCache}, args...), inR, outW, stderr)
		outW.Close()
		exit <- code
	}()
	// The server ends with the test, before the test's temporary
	// directories (which it may be writing) are removed: cleanups run
	// last-registered first.
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the server did not stop when its input closed\n%s", stderr)
		}
	})
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, copts).
		Connect(context.Background(), &mcpsdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	return cs, stderr, exit, inW
}

func callExecute(t *testing.T, cs *mcpsdk.ClientSession, code string) (bool, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": code}})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return res.IsError, v
}

func TestMCPStdio(t *testing.T) {
	cs, stderr, exit := startStdio(t, context.Background())
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 {
		t.Fatalf("tools = %v", list.Tools)
	}
	// The documented defaults reach the model.
	for _, want := range []string{"a run may take 30s", "at most 100 tool calls per run", "cut at 20000 bytes"} {
		if !strings.Contains(list.Tools[0].Description, want) {
			t.Errorf("description lacks %q", want)
		}
	}
	isErr, v := callExecute(t, cs, `const xs: number[] = [1, 2, 3]; return xs.map((x) => x * 2)`)
	if isErr || v["ok"] != true {
		t.Errorf("result = %v", v)
	}
	_ = cs.Close() // end of input: a normal shutdown
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("exit %d\n%s", code, stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop at the end of its input")
	}
	if !strings.Contains(stderr.String(), "no tools") || !strings.Contains(stderr.String(), "msg=execute ok=true") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if got := cs.InitializeResult().ServerInfo.Version; got != version() {
		t.Errorf("got serverInfo.version %q, want the build's %q", got, version())
	}
}

func TestMCPSignalStopsStdio(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cs, stderr, exit := startStdio(t, ctx)
	defer cs.Close()
	if isErr, _ := callExecute(t, cs, `return 1`); isErr {
		t.Fatal("execute failed")
	}
	cancel() // what SIGINT and SIGTERM do
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("exit %d\n%s", code, stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop on the signal")
	}
}

// TestMCPStdioClientGoneMidRun: the client's end of the pipe closes during
// a run; the run is cancelled at once (not left to its 60-second limit)
// and the command exits normally.
func TestMCPStdioClientGoneMidRun(t *testing.T) {
	cs, stderr, exit, stdin := startStdioPipe(t, context.Background(), "--timeout", "60s")
	go func() {
		_, _ = cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute",
			Arguments: map[string]any{"code": `await new Promise((r) => setTimeout(r, 50000))`}})
	}()
	time.Sleep(300 * time.Millisecond) // let the run start
	start := time.Now()
	_ = stdin.Close()
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("exit %d\n%s", code, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the server did not stop after its client left:\n%s", stderr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("stopping took %v", took)
	}
	// Stopped by the client's cancellation or by the shutdown, whichever
	// reached it first; either way an interruption, logged as one.
	if log := stderr.String(); !strings.Contains(log, "msg=execute ok=false") || !(strings.Contains(log, "canceled") || strings.Contains(log, "run stopped")) {
		t.Errorf("the abandoned run is not logged as interrupted:\n%s", stderr)
	}
}

// nodeSetup returns node and the repository root, or skips.
func nodeSetup(t *testing.T) (string, string) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("the pinned npm packages are missing: run npm ci (make test does)")
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	return nodeBin, root
}

func writeConfig(t *testing.T, v any) string {
	t.Helper()
	b, _ := json.Marshal(v)
	path := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func everythingConfig(t *testing.T) string {
	nodeBin, root := nodeSetup(t)
	return writeConfig(t, map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": nodeBin, "args": []string{filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")}},
	}})
}

func TestMCPUpstreamThroughCLI(t *testing.T) {
	cfg := everythingConfig(t)
	cs, stderr, exit := startStdio(t, context.Background(), "--config", cfg)
	isErr, v := callExecute(t, cs, `
		const [a, b] = await Promise.all([tools.everything.echo({ message: "x" }), tools.everything["get-sum"]({ a: 1, b: 2 })])
		return a + " / " + b`)
	if isErr || v["value"] != "Echo: x / The sum of 1 and 2 is 3." {
		t.Errorf("result = %v\n%s", v, stderr)
	}
	_ = cs.Close()
	if code := <-exit; code != exitOK {
		t.Errorf("exit %d", code)
	}
}

// TestMCPUpstreamFailure: a server that cannot start is logged at error
// level and the others are served; --require-all makes it fatal (exit 1)
// as it used to be.
func TestMCPUpstreamFailure(t *testing.T) {
	cfg := writeConfig(t, map[string]any{"mcpServers": map[string]any{"gone": map[string]any{"command": "/nonexistent/server"}}})
	t.Run("lenient", func(t *testing.T) {
		// The server serves while it starts the upstream: a client stays
		// until the failure is logged, then ends the session.
		cs, stderr, exit, _ := startStdioClient(t, context.Background(), nil, "--config", cfg)
		want := `level=ERROR msg="the server did not start; serving the others and retrying it in the background" server=gone error="its command could not be started`
		for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), want); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("got stderr:\n%s\nwant %q", stderr, want)
			}
		}
		_ = cs.Close()
		if code := <-exit; code != exitOK {
			t.Errorf("got exit %d, want %d", code, exitOK)
		}
	})
	t.Run("require all", func(t *testing.T) {
		var out, errb bytes.Buffer
		args := []string{"--config", cfg, "--cache-dir", engineCache, "--require-all"}
		code := runMCP(context.Background(), args, strings.NewReader(""), &out, &errb)
		want := `codemode mcp: mcp: connecting: server "gone": its command could not be started`
		if code != exitFailure || !strings.Contains(errb.String(), want) {
			t.Errorf("got exit %d, stderr:\n%s\nwant exit %d and %q", code, errb.String(), exitFailure, want)
		}
	})
}

var urlRe = regexp.MustCompile(`url=(http://\S+/mcp)`)

// startHTTP runs the command with --http on a free loopback port and
// returns its URL.
func startHTTP(t *testing.T, args ...string) string {
	t.Helper()
	url, _ := startHTTPAt(t, "127.0.0.1:0", args...)
	return url
}

// startHTTPAt runs the command with --http addr and returns its URL (on
// 127.0.0.1 when addr binds every interface) and its log.
func startHTTPAt(t *testing.T, addr string, args ...string) (string, *syncBuffer) {
	t.Helper()
	return startHTTPAs(t, "mcp", addr, args...)
}

// startHTTPAs is startHTTPAt for codemode mcp (name "mcp") or serve.
func startHTTPAs(t *testing.T, name, addr string, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- runMCPAs(ctx, name, append([]string{"--http", addr, "--cache-dir", engineCache}, args...), strings.NewReader(""), io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exit:
			if code != exitOK {
				t.Errorf("exit %d\n%s", code, stderr)
			}
		case <-time.After(15 * time.Second):
			t.Error("the HTTP server did not stop")
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := urlRe.FindStringSubmatch(stderr.String()); m != nil {
			return strings.Replace(strings.Replace(m[1], "//[::]:", "//127.0.0.1:", 1), "//0.0.0.0:", "//127.0.0.1:", 1), stderr
		}
		select {
		case code := <-exit:
			t.Fatalf("exited %d:\n%s", code, stderr)
		default:
		}
	}
	t.Fatalf("no URL logged:\n%s", stderr)
	return "", nil
}

func TestMCPHTTP(t *testing.T) {
	url := startHTTP(t)
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	isErr, v := callExecute(t, cs, `return "<" + [1, 2].join() + ">"`)
	if isErr || v["value"] != "<1,2>" {
		t.Errorf("result = %v", v)
	}
}

// initializeBody is an MCP initialize request, which opens a session.
const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// post sends an initialize request to url with the given headers ("Host"
// sets the Host header) and returns the response, its body read.
func post(t *testing.T, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(initializeBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestMCPHTTPLoopbackChecks: on loopback without a token, a request must
// name the server's own loopback address and port as its Host, and a
// browser's Origin must be loopback, or it gets 403 with the reason.
func TestMCPHTTPLoopbackChecks(t *testing.T) {
	url := startHTTP(t)
	port := url[strings.LastIndex(url, ":")+1 : strings.LastIndex(url, "/")]
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   int
		reason string
	}{
		{"own address", nil, http.StatusOK, ""},
		{"localhost", map[string]string{"Host": "localhost:" + port}, http.StatusOK, ""},
		{"IPv6 loopback name", map[string]string{"Host": "[::1]:" + port}, http.StatusOK, ""},
		{"loopback origin", map[string]string{"Origin": "http://localhost:6274"}, http.StatusOK, ""},
		{"foreign host", map[string]string{"Host": "evil.example:" + port}, http.StatusForbidden, "Host"},
		{"rebound name", map[string]string{"Host": "127.0.0.1.nip.io:" + port}, http.StatusForbidden, "Host"},
		{"other port", map[string]string{"Host": "127.0.0.1:1"}, http.StatusForbidden, "Host"},
		{"no port", map[string]string{"Host": "localhost"}, http.StatusForbidden, "Host"},
		{"foreign origin", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden, "Origin"},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden, "Origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, url, tc.header)
			if resp.StatusCode != tc.want || !strings.Contains(body, tc.reason) {
				t.Errorf("got %d %q, want %d naming %q", resp.StatusCode, body, tc.want, tc.reason)
			}
		})
	}
}

// bearer adds an Authorization header to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPHTTPToken: with --http-token-env, on loopback and (with
// --http-allow-remote) on every interface, a request without the token or
// with a wrong one gets 401 and a Bearer challenge, and a client sending
// it is served.
func TestMCPHTTPToken(t *testing.T) {
	t.Setenv(tokenEnv, testToken)
	for _, bind := range []struct {
		addr string
		args []string
	}{
		{"127.0.0.1:0", []string{"--http-token-env", tokenEnv}},
		{"0.0.0.0:0", []string{"--http-allow-remote", "--http-token-env", tokenEnv}},
	} {
		t.Run(bind.addr, func(t *testing.T) {
			url, stderr := startHTTPAt(t, bind.addr, bind.args...)
			for _, tc := range []struct {
				name, authorization, origin string
				want                        int
			}{
				{"none", "", "", http.StatusUnauthorized},
				{"wrong, same length", "Bearer " + strings.Repeat("x", len(testToken)), "", http.StatusUnauthorized},
				{"prefix of the token", "Bearer " + testToken[:len(testToken)-1], "", http.StatusUnauthorized},
				{"token with more", "Bearer " + testToken + "0", "", http.StatusUnauthorized},
				{"other scheme", "Basic " + testToken, "", http.StatusUnauthorized},
				{"no scheme", testToken, "", http.StatusUnauthorized},
				{"foreign origin, no token", "", "http://evil.example", http.StatusUnauthorized},
				{"right", "Bearer " + testToken, "", http.StatusOK},
				{"scheme in lower case", "bearer " + testToken, "", http.StatusOK},
				// The token, not the origin, is what admits a client.
				{"right, from an extension", "Bearer " + testToken, "chrome-extension://abc", http.StatusOK},
			} {
				t.Run(tc.name, func(t *testing.T) {
					header := map[string]string{}
					if tc.authorization != "" {
						header["Authorization"] = tc.authorization
					}
					if tc.origin != "" {
						header["Origin"] = tc.origin
					}
					resp, body := post(t, url, header)
					if resp.StatusCode != tc.want {
						t.Errorf("got %d %q, want %d", resp.StatusCode, body, tc.want)
					}
					if challenge := resp.Header.Get("WWW-Authenticate"); tc.want == http.StatusUnauthorized && !strings.HasPrefix(challenge, "Bearer") {
						t.Errorf("got WWW-Authenticate %q, want a Bearer challenge", challenge)
					}
				})
			}
			t.Run("SDK client", func(t *testing.T) {
				client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil)
				if _, err := client.Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil); err == nil {
					t.Error("got a session without the token, want a refusal")
				}
				cs, err := client.Connect(context.Background(), &mcpsdk.StreamableClientTransport{
					Endpoint: url, HTTPClient: &http.Client{Transport: bearer{testToken}}}, nil)
				if err != nil {
					t.Fatalf("with the token: %v", err)
				}
				defer cs.Close()
				if isErr, v := callExecute(t, cs, `return 6 * 7`); isErr || v["value"] != 42.0 {
					t.Errorf("got %v, want value 42", v)
				}
			})
			if remote := !strings.HasPrefix(bind.addr, "127."); remote != strings.Contains(stderr.String(), "plain HTTP") {
				t.Errorf("got plain-HTTP warning %v, want %v:\n%s", !remote, remote, stderr)
			}
		})
	}
}

// TestMCPHTTPSessionFlags: with --http-max-sessions 1 a new session takes
// the place of an idle one, one is refused with 503 and a JSON-RPC error
// while the only session is busy, and --http-idle-timeout closes an idle
// one.
func TestMCPHTTPSessionFlags(t *testing.T) {
	url, stderr := startHTTPAt(t, "127.0.0.1:0", "--http-max-sessions", "1", "--http-idle-timeout", "3s")
	resp, body := post(t, url, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first session: got %d %q, want 200", resp.StatusCode, body)
	}
	first := resp.Header.Get("Mcp-Session-Id")
	if resp, body := post(t, url, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("second session: got %d %q, want 200 in the idle one's place", resp.StatusCode, body)
	}
	if status := ping(t, url, first); status != http.StatusNotFound {
		t.Errorf("the evicted session: got %d, want 404", status)
	}

	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	slow := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute",
			Arguments: map[string]any{"code": `await new Promise((r) => setTimeout(r, 2000)); return "slow"`}})
		slow <- err
	}()
	time.Sleep(500 * time.Millisecond) // let the run start
	if resp, body := post(t, url, nil); resp.StatusCode != http.StatusServiceUnavailable ||
		!strings.Contains(body, `"error":{"code":-32000,"message":"the server already has its limit of 1 session open`) {
		t.Errorf("with the session busy: got %d %q, want 503 with a JSON-RPC error naming the limit", resp.StatusCode, body)
	}
	if !strings.Contains(stderr.String(), "refused a new HTTP session") {
		t.Errorf("the refusal is not logged:\n%s", stderr)
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	// Idle for --http-idle-timeout, the session closes. (Each ping is a
	// request, so each pause is longer than the timeout.)
	var status int
	for _, pause := range []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second} {
		time.Sleep(pause)
		if status = ping(t, url, cs.ID()); status == http.StatusNotFound {
			break
		}
	}
	if status != http.StatusNotFound {
		t.Errorf("got %d for the session idle for 16s, want 404 (expired)", status)
	}
}

// ping sends a ping in session id and returns the status.
func ping(t *testing.T, url, id string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestMCPMaxRuns: with --max-runs 1, a call made while another program
// runs waits for it (the log says so) and then runs.
func TestMCPMaxRuns(t *testing.T) {
	cs, stderr, _ := startStdio(t, context.Background(), "--max-runs", "1", "--log-level", "debug")
	defer cs.Close()
	slow := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute",
			Arguments: map[string]any{"code": `await new Promise((r) => setTimeout(r, 5000)); return "slow"`}})
		if err == nil && res.IsError {
			err = fmt.Errorf("isError: %v", res.StructuredContent)
		}
		slow <- err
	}()
	time.Sleep(300 * time.Millisecond) // let the slow run start
	if isErr, v := callExecute(t, cs, `return "quick"`); isErr || v["value"] != "quick" {
		t.Errorf("got %v, want value quick", v)
	}
	if err := <-slow; err != nil {
		t.Errorf("slow run: got %v, want success", err)
	}
	if !strings.Contains(stderr.String(), "execute waited for a run slot") {
		t.Errorf("no run waited for a slot:\n%s", stderr)
	}
}

// inspect runs the official MCP inspector's CLI against "codemode mcp"
// with serverArgs, over stdio, and returns its JSON output.
func inspect(t *testing.T, serverArgs []string, args ...string) map[string]any {
	t.Helper()
	nodeBin, root := nodeSetup(t)
	inspector := filepath.Join(root, "node_modules", "@modelcontextprotocol", "inspector-cli", "build", "cli.js")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, append([]string{inspector, "--cli", exe}, args...)...)
	sargs, _ := json.Marshal(append([]string{"--cache-dir", engineCache}, serverArgs...))
	// The inspector passes its environment on to the server it starts.
	cmd.Env = append(os.Environ(), mainEnv+"=1", argsEnv+"="+string(sargs))
	// The inspector CLI finds its package.json by checking "../package.json"
	// against the working directory but importing it relative to its
	// module: run it from its own build directory so both agree (the
	// standalone package otherwise looks for the monorepo's).
	cmd.Dir = filepath.Dir(inspector)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspector %v: %v\n%s\n%s", args, err, stdout.String(), stderr.String())
	}
	var v map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
		t.Fatalf("inspector output is not JSON: %v\n%s", err, stdout.String())
	}
	return v
}

// TestMCPInspector drives the command with the official MCP inspector's
// CLI over stdio: list the tools, then call execute.
func TestMCPInspector(t *testing.T) {
	cfg := everythingConfig(t)
	list := inspect(t, []string{"--config", cfg}, "--method", "tools/list")
	tools := list["tools"].([]any)
	if len(tools) != 1 || tools[0].(map[string]any)["name"] != "execute" {
		t.Fatalf("tools/list = %v", list)
	}
	// The server answers before its upstream has started: the list has
	// its tools or says it is still connecting, and the call below waits
	// for it.
	if d := tools[0].(map[string]any)["description"].(string); !strings.Contains(d, "get-sum") && !strings.Contains(d, "- `tools.everything`: still connecting") {
		t.Errorf("the description neither lists the upstream tools nor says it is connecting:\n%s", d)
	}
	call := inspect(t, []string{"--config", cfg}, "--method", "tools/call", "--tool-name", "execute",
		"--tool-arg", `code=const r = await tools.everything["get-sum"]({ a: 20, b: 22 }); return r.split(" ").at(-1)`)
	sc, _ := call["structuredContent"].(map[string]any)
	if call["isError"] == true || sc["ok"] != true || sc["value"] != "42." {
		t.Errorf("tools/call = %v", call)
	}
}

// TestMCPConformance runs the official conformance suite's server
// scenarios against "codemode mcp --http". Scenarios that call the
// suite's fixture tools, prompts and resources cannot pass against a
// one-tool server; testdata/mcp/conformance-baseline.yml lists them, and
// the runner fails on any other failure or on a listed one that passes.
// TestMCPConformance runs the official conformance suite's server
// scenarios against one codemode server three times over, as a
// long-running server meets clients that come and go: every scenario that
// applies to a code-mode server must pass every time, and the ones
// listed in the baseline (fixtures a code-mode server does not have) must
// fail. The suite needs node 22, which the npm packages bring (node22).
func TestMCPConformance(t *testing.T) {
	_, root := nodeSetup(t)
	node22 := filepath.Join(root, "node_modules", "node22", "bin", "node")
	if _, err := os.Stat(node22); err != nil {
		t.Fatalf("node 22 is missing (npm ci installs it as node22): %v", err)
	}
	url := startHTTP(t)
	for round := 1; round <= 3; round++ {
		out := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, node22, filepath.Join(root, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
			"server", "--url", url, "-o", out,
			"--expected-failures", filepath.Join(root, "testdata", "mcp", "conformance-baseline.yml"))
		cmd.Dir = out
		output, err := cmd.CombinedOutput()
		cancel()
		summary := conformanceSummary(t, out)
		if err != nil {
			t.Errorf("round %d: the conformance runner failed: %v\n%s\nresults:\n%s", round, err, tail(string(output), 3000), summary)
		}
		for _, must := range []string{"server-initialize PASS", "ping PASS", "tools-list PASS", "dns-rebinding-protection PASS",
			"logging-set-level PASS", "server-sse-multiple-streams PASS", "resources-list PASS", "prompts-list PASS"} {
			if !strings.Contains(summary, must) {
				t.Errorf("round %d: summary lacks %q:\n%s", round, must, summary)
			}
		}
		if round == 1 {
			t.Logf("conformance results:\n%s", summary)
		}
	}
}

var stampRe = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// conformanceSummary reads the runner's per-scenario checks.json files.
func conformanceSummary(t *testing.T, dir string) string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var lines []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			continue
		}
		var checks []struct {
			Status       string `json:"status"`
			ErrorMessage string `json:"errorMessage"`
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			continue
		}
		status, why := "NOCHECKS", "no check succeeded or failed"
		for _, c := range checks {
			if c.Status == "SUCCESS" && status == "NOCHECKS" {
				status, why = "PASS", ""
			}
		}
		for _, c := range checks {
			if c.Status == "FAILURE" || c.Status == "WARNING" {
				status, why = c.Status, c.ErrorMessage
			}
		}
		// Directory names are "server-<scenario>-<ISO timestamp>".
		name := stampRe.ReplaceAllString(strings.TrimPrefix(e.Name(), "server-"), "")
		lines = append(lines, strings.TrimSpace(name+" "+status+" "+why))
	}
	return strings.Join(lines, "\n")
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestMCPSurvivesHostilePrograms: codemode mcp, over standard input/output
// and over HTTP, answers every hostile program with a bounded result and
// goes on serving. Each of these once took the process down, ran past its
// deadline or returned megabytes.
func TestMCPSurvivesHostilePrograms(t *testing.T) {
	programs := map[string]string{
		"deep typescript":      "let x: number = 1; return " + strings.Repeat("!", 200_000) + "x",
		"deep brackets":        "return " + strings.Repeat("[", 200_000) + "1" + strings.Repeat("]", 200_000),
		"wrapper break":        "})(); throw new SyntaxError('x'); (async () => {",
		"timer touching URL":   `return await new Promise((r) => setTimeout(() => r(new URL("https://a.test/").href), 1))`,
		"huge throw":           `throw new Error("x".repeat(2e7))`,
		"long unknown tool":    `await tools["x".repeat(300000)]({})`,
		"forged kind":          `const e = new Error("x"); e.kind = "TimeoutExceeded"; throw e`,
		"call loop":            `for (;;) tools.x({})`,
		"busy loop":            `while (true) {}`,
		"stack trace function": `Error.prepareStackTrace = (e, s) => s.map((c) => typeof c.getFunction()).join(); return new Error().stack`,
	}
	check := func(t *testing.T, cs *mcpsdk.ClientSession) {
		for name, code := range programs {
			res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": code}})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			b, _ := json.Marshal(res)
			if len(b) > 60_000 { // the 20,000-byte output budget, as text and as structured content
				t.Errorf("%s: the result is %d bytes", name, len(b))
			}
			if name != "timer touching URL" && name != "stack trace function" && !res.IsError {
				t.Errorf("%s: succeeded: %s", name, b)
			}
		}
		isErr, v := callExecute(t, cs, `return [1, 2, 3].map((x) => x * 2)`)
		if isErr || fmt.Sprint(v["value"]) != "[2 4 6]" {
			t.Errorf("after the hostile programs: %v", v)
		}
	}
	t.Run("stdio", func(t *testing.T) {
		cs, stderr, exit := startStdio(t, context.Background(), "--timeout", "2s")
		check(t, cs)
		_ = cs.Close()
		select {
		case code := <-exit:
			if code != exitOK {
				t.Errorf("exit %d\n%s", code, tail(stderr.String(), 2000))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not stop")
		}
	})
	t.Run("http", func(t *testing.T) {
		url := startHTTP(t, "--timeout", "2s")
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		check(t, cs)
	})
}

// TestMCPSessionStateAndCells: --session-state keeps values from one run
// to the next, and --cells adds the wait tool.
func TestMCPSessionStateAndCells(t *testing.T) {
	cs, _, _ := startStdio(t, context.Background(), "--session-state", "--cells", "--demo-tools", "--cache-dir", engineCache)
	defer cs.Close()
	if isErr, v := callExecute(t, cs, `await tools.$codemode.store({ key: "seen", value: ["o-1"] }); return 1`); isErr {
		t.Fatalf("store: %v", v)
	}
	if isErr, v := callExecute(t, cs, `return (await tools.$codemode.load({ key: "seen" })).value`); isErr || fmt.Sprint(v["value"]) != "[o-1]" {
		t.Fatalf("load: %v", v)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 2 || tools.Tools[1].Name != "wait" && tools.Tools[0].Name != "wait" {
		t.Fatalf("tools: %v %v", tools, err)
	}
}

// readmeBlock is the code block of README.md after the marker comment.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- "+marker+" -->\n```")
	_, block, _ = strings.Cut(block, "\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || block == "" {
		t.Fatalf("the README has no %s block", marker)
	}
	return block
}

// TestREADMEClientConfigs: the client configs in the README start
// codemode mcp with flags it takes, and the servers.json beside them
// resolves ${GITHUB_TOKEN} and ${userHome} from the environment the
// client's env block gives codemode.
func TestREADMEClientConfigs(t *testing.T) {
	for _, marker := range []string{"claude-desktop-config", "cursor-config"} {
		t.Run(marker, func(t *testing.T) {
			cfg, err := mcp.ParseConfig([]byte(readmeBlock(t, marker)))
			if err != nil {
				t.Fatal(err)
			}
			sc := cfg.Servers["codemode"]
			if len(sc.Args) == 0 || sc.Args[0] != "mcp" || sc.Env["PATH"] == "" {
				t.Fatalf("got %+v, want codemode mcp with a PATH in its env", sc)
			}
			fs := newFlagSet("mcp", mcpUsage, io.Discard)
			var f mcpFlags
			f.register(fs)
			if rest, err := parseArgs(fs, sc.Args[1:]); err != nil || len(rest) != 0 {
				t.Errorf("codemode %q: got %v, %q; want flags codemode mcp takes", sc.Args, err, rest)
			}
			for _, name := range strings.Split(f.sources.bearerEnv, ",") {
				if name != "" && sc.Env[name] == "" {
					t.Errorf("--bearer-env %s is not in the env block", name)
				}
			}
		})
	}
	t.Setenv("GITHUB_TOKEN", "ghp_from_the_env_block")
	t.Setenv("HOME", "/home/someone")
	cfg, err := mcp.ParseConfig([]byte(readmeBlock(t, "servers-json")))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["github"].Env["GITHUB_PERSONAL_ACCESS_TOKEN"]; got != "ghp_from_the_env_block" {
		t.Errorf("got the github token %q, want it from GITHUB_TOKEN", got)
	}
	if args := cfg.Servers["notes"].Args; !slices.Contains(args, "/home/someone/notes") {
		t.Errorf("got notes args %q, want ${userHome}/notes expanded", args)
	}
}
