package cli

import (
	"context"
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

	d := description()
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
			t.Errorf("got exit %d, want %d", code, exitOK)
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

// TestMCPInspectorUnavailable: the official inspector's CLI lists execute
// with the good server's tools while another cannot start, and sees that
// one named as unavailable.
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
	for _, want := range []string{"get-sum", "- `tools.gone`: its command could not be started"} {
		if !strings.Contains(d, want) {
			t.Errorf("got a description without %q:\n%s", want, tail(d, 1500))
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
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(list.Tools) != 1 {
		t.Fatalf("got tools %v, %v; want execute", list, err)
	}
	if !strings.Contains(list.Tools[0].Description, "- `tools.db`: its command exited with status 1") {
		t.Errorf("got a description without tools.db unavailable:\n%s", tail(list.Tools[0].Description, 1500))
	}
	log := stderr.String()
	line := logLine(log, "level=ERROR", "server=db")
	for _, want := range []string{"app:[REDACTED]@db.internal/orders", "report:[REDACTED]@replica.internal/orders"} {
		if !strings.Contains(line, want) {
			t.Errorf("got error record %q, want it to contain %q", line, want)
		}
	}
	for what, text := range map[string]string{"log": log, "description": list.Tools[0].Description} {
		for _, p := range []string{argPass, envPass} {
			if strings.Contains(text, p) {
				t.Errorf("the %s holds %q:\n%s", what, p, text)
			}
		}
	}
}
