package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The single-binary default: codemode serve --worker with nothing
// installed runs programs, keeps session state in the embedded server,
// and stops cleanly at the end of its input.
func TestServeWithWorker(t *testing.T) {
	data := filepath.Join(t.TempDir(), "cluster")
	ctx := context.Background()
	cs, stderr, exit := startServe(t, ctx, "--worker", "--demo-tools", "--session-state", "--data", data)
	isErr, v := callExecute(t, cs, `const o = (await tools.shop.listOrders({})).orders[0];
		await tools.$codemode.store({ key: "last", value: o.id });
		return o.totalCents`)
	if isErr || v["ok"] != true || v["value"] != float64(4599) {
		t.Fatalf("result = %v\n%s", v, stderr)
	}
	isErr, v = callExecute(t, cs, `return await tools.$codemode.load({ key: "last" })`)
	if isErr || v["ok"] != true || !strings.Contains(string(mustMarshal(v["value"])), "o-1001") {
		t.Fatalf("session state across runs = %v", v)
	}
	_ = cs.Close()
	select {
	case code := <-exit:
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop at the end of its input")
	}
	for _, want := range []string{"embedded NATS server started", "codemode worker --data " + data, "worker started", "msg=run "} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr)
		}
	}
	if fi, err := os.Stat(filepath.Join(data, "token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v", fi, err)
	}
}

// serve --cells: a run that outlives its execute call goes on on the
// worker, and wait collects its lines and result.
func TestServeCells(t *testing.T) {
	data := filepath.Join(t.TempDir(), "cluster")
	ctx := context.Background()
	cs, stderr, _ := startServe(t, ctx, "--worker", "--cells", "--demo-tools", "--data", data)
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": `// @exec: yield=1ms
		let n = 0;
		for (let i = 0; i < 3; i++) { console.log("page " + i); n += (await tools.shop.listOrders({})).orders.length; }
		return n`}})
	if err != nil {
		t.Fatal(err)
	}
	out := res.StructuredContent.(map[string]any)
	if out["running"] != true {
		t.Fatalf("execute did not answer with a running cell: %v", out)
	}
	var lines []any
	for range 100 {
		l, _ := out["logs"].([]any)
		lines = append(lines, l...)
		if out["running"] != true {
			break
		}
		res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "wait", Arguments: map[string]any{"cellId": out["cellId"], "timeoutMs": 500}})
		if err != nil {
			t.Fatal(err)
		}
		out = res.StructuredContent.(map[string]any)
	}
	if out["ok"] != true || out["value"] != float64(18) || len(lines) != 3 {
		t.Fatalf("result %v, lines %v\n%s", out, lines, stderr)
	}
}

// A front without a worker and a worker in a process of its own, joined
// by the front's embedded server: the program runs on the worker.
func TestServeAndWorkerProcess(t *testing.T) {
	data := filepath.Join(t.TempDir(), "cluster")
	ctx := context.Background()
	cs, stderr, _ := startServe(t, ctx, "--demo-tools", "--data", data)
	worker, werr := startProcess(t, "worker", "--demo-tools", "--data", data, "--cache-dir", engineCache)
	isErr, v := callExecute(t, cs, `return (await tools.shop.listOrders({})).orders.length`)
	if isErr || v["ok"] != true || v["value"] != float64(6) {
		t.Fatalf("result = %v\nfront:\n%s\nworker:\n%s", v, stderr, werr)
	}
	// The worker logs the run just after the front has its result.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(werr.String(), "msg=run ") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(stderr.String(), "msg=run ") || !strings.Contains(werr.String(), "msg=run ") {
		t.Errorf("the run was not the worker's:\nfront:\n%s\nworker:\n%s", stderr, werr)
	}
	_ = worker.Process.Signal(syscall.SIGTERM)
	if err := worker.Wait(); err != nil {
		t.Errorf("worker exit: %v\n%s", err, werr)
	}
}

// codemode nodes lists a front and a worker process; codemode drain has
// the worker stop, and its process exits.
func TestNodesAndDrainCommands(t *testing.T) {
	data := filepath.Join(t.TempDir(), "cluster")
	ctx := context.Background()
	cs, stderr, _ := startServe(t, ctx, "--demo-tools", "--data", data)
	worker, werr := startProcess(t, "worker", "--demo-tools", "--data", data, "--cache-dir", engineCache, "--worker-runs", "3")
	if isErr, v := callExecute(t, cs, `return 1`); isErr || v["ok"] != true {
		t.Fatalf("result = %v\n%s\n%s", v, stderr, werr)
	}
	var list []map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; {
		var out, errb bytes.Buffer
		if code := Run([]string{"nodes", "--json", "--data", data}, strings.NewReader(""), &out, &errb); code != exitOK {
			t.Fatalf("nodes: exit %d: %s", code, errb.String())
		}
		list = nil
		_ = json.Unmarshal(out.Bytes(), &list)
		// Both nodes, and the worker has said the run ended (its status
		// beats every few seconds).
		idle := false
		for _, n := range list {
			if ws, _ := n["workers"].([]any); len(ws) == 1 {
				w, _ := ws[0].(map[string]any)
				idle = w["busy"] == float64(0)
			}
		}
		if len(list) == 2 && idle || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var name string
	for _, n := range list {
		if n["front"] != true {
			name, _ = n["name"].(string)
		}
	}
	if len(list) != 2 || name == "" {
		t.Fatalf("nodes: %v", list)
	}
	var out, errb bytes.Buffer
	if code := Run([]string{"nodes", "--data", data}, strings.NewReader(""), &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), "front") || !strings.Contains(out.String(), name) || !strings.Contains(out.String(), "0/3") {
		t.Fatalf("nodes table: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := Run([]string{"drain", "--data", data, "nobody"}, strings.NewReader(""), &out, &errb); code != exitFailure || !strings.Contains(errb.String(), "no worker by that name") {
		t.Fatalf("drain nobody: exit %d %s", code, errb.String())
	}
	if code := Run([]string{"drain", "--data", data, name}, strings.NewReader(""), &out, &errb); code != exitOK || !strings.Contains(out.String(), "is draining") {
		t.Fatalf("drain: exit %d %s%s", code, out.String(), errb.String())
	}
	done := make(chan error, 1)
	go func() { done <- worker.Wait() }()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(werr.String(), "the worker drained") {
			t.Fatalf("worker exit %v\n%s", err, werr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the drained worker did not exit\n%s", werr)
	}
}

// Flags that cannot work are usage errors that say what to do.
func TestServeUsageErrors(t *testing.T) {
	data := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"worker", "--data", filepath.Join(data, "none")}, exitUsage, "start codemode serve first"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:1", "--nats-tls-cert", "c.pem"}, exitUsage, "--nats-tls-cert and --nats-tls-key go together"},
		{[]string{"worker", "--nats", "nats://127.0.0.1:1", "--nats-token-env", "CODEMODE_TEST_NO_SUCH_VAR"}, exitUsage, "CODEMODE_TEST_NO_SUCH_VAR is empty or unset"},
		{[]string{"worker", "--worker-runs", "0", "--data", data}, exitUsage, "--worker-runs must be at least 1"},
		{[]string{"serve", "--nats-listen", "0.0.0.0:4222", "--data", data}, exitFailure, "loopback only"},
		{[]string{"serve", "--nats-cluster-listen", "127.0.0.1:6222", "--data", data}, exitUsage, "--nats-cluster-listen and --nats-routes go together"},
		{[]string{"serve", "--replicas", "9", "--data", data}, exitUsage, "--replicas must be 1 to 5"},
		{[]string{"serve", "--nats-cluster-listen", "10.1.2.3:6222", "--nats-routes", "127.0.0.1:6223", "--data", data}, exitFailure, "loopback only"},
	} {
		var stderr bytes.Buffer
		code := Run(append(tc.args, "--cache-dir", engineCache), strings.NewReader(""), &bytes.Buffer{}, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", tc.args, code, tc.code, tc.want, stderr.String())
		}
	}
}

// startServe runs codemode serve on pipes, like startStdio.
func startServe(t *testing.T, ctx context.Context, args ...string) (*mcpsdk.ClientSession, *syncBuffer, <-chan int) {
	t.Helper()
	return startStdioAs(t, ctx, "serve", args...)
}

// startProcess runs codemode with args in a process of its own until the
// test ends, and returns it and its standard error.
func startProcess(t *testing.T, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	a, _ := json.Marshal(args)
	cmd.Env = append(os.Environ(), cliEnv+"=1", cliArgsEnv+"="+string(a))
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	return cmd, stderr
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// serve --http serves the console next to MCP: on loopback without a
// token it checks Host and Origin as MCP does; with a token, pages send
// a browser to log in and everything else needs the token.
func TestServeConsole(t *testing.T) {
	get := func(u string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
			} else {
				req.Header.Set(header[i], header[i+1])
			}
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if loc := res.Header.Get("Location"); loc != "" {
			return res.StatusCode, loc
		}
		return res.StatusCode, string(b)
	}
	t.Run("loopback", func(t *testing.T) {
		mcpURL, stderr := startHTTPAs(t, "serve", "127.0.0.1:0", "--worker", "--demo-tools", "--data", filepath.Join(t.TempDir(), "cluster"))
		base := strings.TrimSuffix(mcpURL, "/mcp")
		if code, body := get(base + "/console/play"); code != http.StatusOK || !strings.Contains(body, "tools.shop.refundOrder") {
			t.Fatalf("the playground: %d\n%s", code, body)
		}
		if code, loc := get(base + "/"); code != http.StatusSeeOther || loc != "/console/" {
			t.Fatalf("/: %d %q", code, loc)
		}
		if code, _ := get(base+"/console/", "Host", "evil.example"); code != http.StatusForbidden {
			t.Fatalf("a rebinding Host: %d", code)
		}
		if !strings.Contains(stderr.String(), "serving the console") {
			t.Fatalf("the log does not say where the console is:\n%s", stderr)
		}
	})
	t.Run("token", func(t *testing.T) {
		t.Setenv("CONSOLE_TEST_TOKEN", "console-test-token-0123456789")
		mcpURL, _ := startHTTPAs(t, "serve", "127.0.0.1:0", "--worker", "--demo-tools", "--data", filepath.Join(t.TempDir(), "cluster"),
			"--http-token-env", "CONSOLE_TEST_TOKEN")
		base := strings.TrimSuffix(mcpURL, "/mcp")
		if code, loc := get(base + "/console/runs"); code != http.StatusSeeOther || !strings.HasSuffix(loc, "/console/login") {
			t.Fatalf("without the token: %d %q", code, loc)
		}
		if code, _ := get(base+"/console/runs", "Authorization", "Bearer wrong-token-0123456789"); code != http.StatusSeeOther {
			t.Fatalf("a wrong token: %d", code)
		}
		if code, _ := get(base+"/console/runs", "Authorization", "Bearer console-test-token-0123456789"); code != http.StatusOK {
			t.Fatalf("the token: %d", code)
		}
	})
	t.Run("off", func(t *testing.T) {
		mcpURL, _ := startHTTPAs(t, "serve", "127.0.0.1:0", "--worker", "--demo-tools", "--data", filepath.Join(t.TempDir(), "cluster"), "--console=false")
		if code, _ := get(strings.TrimSuffix(mcpURL, "/mcp") + "/console/"); code != http.StatusNotFound {
			t.Fatalf("--console=false: %d", code)
		}
	})
}
