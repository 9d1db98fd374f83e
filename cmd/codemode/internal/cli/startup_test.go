package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// startupConfig writes a config with the everything server and real
// servers that cannot start: a command that does not exist, one that
// crashes, one that hangs, and one that fails until the returned marker
// file exists.
func startupConfig(t *testing.T) (cfg, marker string) {
	t.Helper()
	nodeBin, root := nodeSetup(t)
	everything := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	scripts, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	marker = filepath.Join(t.TempDir(), "ready")
	server := func(args ...string) map[string]any { return map[string]any{"command": nodeBin, "args": args} }
	return writeConfig(t, map[string]any{"mcpServers": map[string]any{
		"everything": server(everything),
		"gone":       map[string]any{"command": "/nonexistent/codemode-test-server"},
		"crash":      server(filepath.Join(scripts, "crash.mjs")),
		"hang":       server(filepath.Join(scripts, "hang.mjs")),
		"late":       server(filepath.Join(scripts, "late.mjs"), marker, everything),
	}}), marker
}

// TestMCPStartupFailures: servers that cannot start do not cost the
// client the others. codemode mcp serves the everything server, logs each
// failure at error level with its exit status and stderr, and its execute
// description names the missing namespaces; when the late one starts, a
// connected client is sent tools/list_changed and can call it.
func TestMCPStartupFailures(t *testing.T) {
	cfg, marker := startupConfig(t)
	changed := make(chan struct{}, 8)
	// A connect timeout that a loaded machine, starting node under the
	// race detector, still meets for the server that does start.
	cs, stderr, exit, _ := startStdioClient(t, context.Background(), &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) { changed <- struct{}{} },
	}, "--config", cfg, "--connect-timeout", "6s")
	defer cs.Close()
	description := func() string {
		t.Helper()
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(list.Tools) != 1 {
			t.Fatalf("got tools %v, %v; want execute", list, err)
		}
		return list.Tools[0].Description
	}

	// Servers start in the background: wait until every one has connected
	// or failed.
	d := description()
	for settle := time.After(2 * time.Minute); strings.Contains(d, "## Tools still connecting"); d = description() {
		select {
		case <-changed:
		case <-settle:
			t.Fatalf("got servers still connecting:\n%s", tail(d, 1500))
		}
	}
	for _, want := range []string{
		"## Unavailable tools",
		"- `tools.gone`: its command could not be started",
		"- `tools.crash`: its command exited with status 1 before completing the MCP handshake\n",
		"- `tools.hang`: it did not answer within 6s\n",
		"- `tools.late`: its command exited with status 1 before completing the MCP handshake\n",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("got a description without %q:\n%s", want, tail(d, 1500))
		}
	}
	if strings.Contains(d, "`tools.everything`") {
		t.Errorf("got the everything server listed as unavailable:\n%s", tail(d, 1500))
	}
	if isErr, v := callExecute(t, cs, `return await tools.everything.echo({ message: "served" })`); isErr || v["value"] != "Echo: served" {
		t.Errorf("got %v, want the everything server served meanwhile\n%s", v, stderr)
	}
	log := stderr.String()
	for server, want := range map[string][]string{
		"gone":  {"its command could not be started", "no such file or directory"},
		"crash": {"its command exited with status 1", "its stderr ended with: crash: FATAL: the environment variable WIDGET_API_KEY is required"},
		"hang":  {"it did not answer within 6s", "its stderr ended with: hang: starting up"},
		"late":  {"its command exited with status 1", "late: not ready"},
	} {
		line := logLine(log, "level=ERROR", "server="+server+" ")
		for _, w := range want {
			if !strings.Contains(line, w) {
				t.Errorf("got error record %q for %s, want it to contain %q", line, server, w)
			}
		}
	}

	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Retries back off from one second; a hanging neighbour must not hold
	// the late one up. Generous: the machine may be busy.
	deadline := time.After(90 * time.Second)
	for !strings.Contains(stderr.String(), "the server is available now") {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the late server was not announced:\n%s", stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The announcement follows the arrival: wait for the description that
	// no longer lists the late server.
	for d = description(); strings.Contains(d, "`tools.late`"); d = description() {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("got tools.late still unavailable after it arrived:\n%s", tail(d, 1500))
		}
	}
	if isErr, v := callExecute(t, cs, `return await tools.late.echo({ message: "late" })`); isErr || v["value"] != "Echo: late" {
		t.Errorf("got %v, want the late server's echo\n%s", v, stderr)
	}
	_ = cs.Close()
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("got exit %d, want %d\n%s", code, exitOK, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop at the end of its input")
	}
}

// TestMCPRequireAllExits: with --require-all a server that cannot start
// stops codemode mcp with exit status 1 and the reason.
func TestMCPRequireAllExits(t *testing.T) {
	cfg, _ := startupConfig(t)
	var out, errb syncBuffer
	code := runMCP(context.Background(), []string{"--config", cfg, "--connect-timeout", "2s", "--require-all", "--cache-dir", engineCache},
		strings.NewReader(""), &out, &errb)
	if code != exitFailure {
		t.Errorf("got exit %d, want %d\n%s", code, exitFailure, errb.String())
	}
	for _, want := range []string{`server "crash": its command exited with status 1`, `server "hang": it did not answer within 2s`, `server "gone"`} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("got stderr without %q:\n%s", want, errb.String())
		}
	}
}

// TestMCPInspectorUnavailable: the official inspector's CLI, which lists
// once and calls once, sees a server that cannot start named as such (or
// as connecting, when it asks that early), and its call of the good
// server waits for that one to start.
func TestMCPInspectorUnavailable(t *testing.T) {
	nodeBin, root := nodeSetup(t)
	cfg := writeConfig(t, map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": nodeBin, "args": []string{filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")}},
		"gone":       map[string]any{"command": "/nonexistent/codemode-test-server"},
	}})
	list := inspect(t, []string{"--config", cfg}, "--method", "tools/list")
	tools, _ := list["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("got tools/list %v, want execute", list)
	}
	d, _ := tools[0].(map[string]any)["description"].(string)
	if !strings.Contains(d, "- `tools.gone`: its command could not be started") && !strings.Contains(d, "- `tools.gone`: still connecting") {
		t.Errorf("got a description without tools.gone unavailable or connecting:\n%s", tail(d, 1500))
	}
	call := inspect(t, []string{"--config", cfg}, "--method", "tools/call", "--tool-name", "execute",
		"--tool-arg", `code=const r = await tools.everything["get-sum"]({ a: 20, b: 22 }); return r.split(" ").at(-1)`)
	if sc, _ := call["structuredContent"].(map[string]any); call["isError"] == true || sc["value"] != "42." {
		t.Errorf("tools/call = %v", call)
	}
}

// settledDescription is the execute description once no server is still
// connecting.
func settledDescription(t *testing.T, cs *mcpsdk.ClientSession) string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(list.Tools) != 1 {
			t.Fatalf("got tools %v, %v; want execute", list, err)
		}
		d := list.Tools[0].Description
		if !strings.Contains(d, "## Tools still connecting") {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("got servers still connecting:\n%s", tail(d, 1500))
		}
	}
}

// logLine is the first line of log that contains every one of subs.
func logLine(log string, subs ...string) string {
next:
	for _, l := range strings.Split(log, "\n") {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		return l
	}
	return ""
}

// TestMCPStartupFailureURLRedacted: a server configured with connection
// strings in its arguments and its environment, which prints them when it
// fails to start, shows their passwords neither in codemode mcp's log nor
// in the execute description; the rest of each URL stays readable.
func TestMCPStartupFailureURLRedacted(t *testing.T) {
	nodeBin, _ := nodeSetup(t)
	script, err := filepath.Abs(filepath.Join("testdata", "dsn.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	const argPass, envPass = "cli-arg-pass-4242", "cli-env-pass-5353"
	cfg := writeConfig(t, map[string]any{"mcpServers": map[string]any{"db": map[string]any{
		"command": nodeBin,
		"args":    []string{script, "postgresql://app:" + argPass + "@db.internal/orders"},
		"env":     map[string]string{"DATABASE_URL": "postgres://report:" + envPass + "@replica.internal/orders"},
	}}})
	cs, stderr, _, _ := startStdioClient(t, context.Background(), nil, "--config", cfg, "--connect-timeout", "5s")
	defer cs.Close()
	d := settledDescription(t, cs)
	if !strings.Contains(d, "- `tools.db`: its command exited with status 1") {
		t.Errorf("got a description without tools.db unavailable:\n%s", tail(d, 1500))
	}
	log := stderr.String()
	line := logLine(log, "level=ERROR", "server=db")
	for _, want := range []string{"app:[REDACTED]@db.internal/orders", "report:[REDACTED]@replica.internal/orders"} {
		if !strings.Contains(line, want) {
			t.Errorf("got error record %q, want it to contain %q", line, want)
		}
	}
	for what, text := range map[string]string{"log": log, "description": d} {
		for _, p := range []string{argPass, envPass} {
			if strings.Contains(text, p) {
				t.Errorf("the %s holds %q:\n%s", what, p, text)
			}
		}
	}
}

// TestMCPAnswersWhileServersStart: codemode mcp answers initialize at
// once while one upstream never answers and another takes its time. The
// execute description names both as still connecting; a program that
// calls the slow one waits for it and gets its answer once it is up;
// the client is sent tools/list_changed and the description lists the
// slow server's tools; a call to the hanging one fails after the run's
// time, naming the server and its state.
func TestMCPAnswersWhileServersStart(t *testing.T) {
	nodeBin, root := nodeSetup(t)
	everything := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	scripts, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ready")
	cfg := writeConfig(t, map[string]any{"mcpServers": map[string]any{
		"hang": map[string]any{"command": nodeBin, "args": []string{filepath.Join(scripts, "hang.mjs")}},
		"slow": map[string]any{"command": nodeBin, "args": []string{filepath.Join(scripts, "slow.mjs"), marker, everything}},
	}})
	changed := make(chan struct{}, 8)
	start := time.Now()
	// The hanging server has ten minutes to start: longer than the test.
	cs, stderr, exit, _ := startStdioClient(t, context.Background(), &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) { changed <- struct{}{} },
	}, "--config", cfg, "--connect-timeout", "10m", "--timeout", "3s")
	defer cs.Close()
	// The promise: a client is not kept waiting by servers that are slow
	// to start. Generous for a loaded machine; the servers' ten minutes
	// are what it is measured against.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("initialize took %s while an upstream hangs; want it answered at once", took)
	}
	description := func() string {
		t.Helper()
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(list.Tools) != 1 {
			t.Fatalf("got tools %v, %v; want execute", list, err)
		}
		return list.Tools[0].Description
	}
	d := description()
	for _, want := range []string{"## Tools still connecting", "- `tools.hang`: still connecting", "- `tools.slow`: still connecting"} {
		if !strings.Contains(d, want) {
			t.Errorf("got a description without %q:\n%s", want, tail(d, 1500))
		}
	}

	// A program calling the slow server waits for it.
	type answer struct {
		isErr bool
		v     map[string]any
	}
	got := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute",
			Arguments: map[string]any{"code": `return await tools.slow.echo({ message: "waited" })`}})
		if err != nil {
			got <- answer{true, map[string]any{"error": err.Error()}}
			return
		}
		var v map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &v)
		got <- answer{res.IsError, v}
	}()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "execute waits for servers still connecting"); {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not wait for the slow server\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-got:
		if a.isErr || a.v["value"] != "Echo: waited" {
			t.Errorf("got %v, want the slow server's echo once it is up\n%s", a.v, stderr)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the call waiting for the slow server did not return\n%s", stderr)
	}
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatal("the client was not sent tools/list_changed when the slow server arrived")
	}
	d = description()
	if strings.Contains(d, "`tools.slow`:") || !strings.Contains(d, "tools.slow.echo") || !strings.Contains(d, "- `tools.hang`: still connecting") {
		t.Errorf("got a description that does not list the slow server's tools, with hang still connecting:\n%s", tail(d, 2500))
	}

	// The hanging server: the run waits as long as it may run, then the
	// call fails with the server's state.
	isErr, v := callExecute(t, cs, `return await tools.hang.anything({})`)
	e, _ := v["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if !isErr || e["kind"] != "UnknownTool" || !strings.Contains(msg, `the MCP server "hang" is still connecting`) {
		t.Errorf("got %v, want an UnknownTool naming the hanging server and its state", v)
	}
	// Shutting down stops the server still connecting too.
	_ = cs.Close()
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("got exit %d, want %d\n%s", code, exitOK, stderr)
		}
	case <-time.After(time.Minute):
		t.Fatal("the server did not stop at the end of its input")
	}
}
