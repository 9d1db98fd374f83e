package cli

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode/internal/enginebin"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// brokenEngine names a file that is not the pinned engine build, for
// $CODEMODE_ENGINE_WASM.
func brokenEngine(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "engine.wasm")
	if err := os.WriteFile(path, []byte("\x00asm, but not the pinned build"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mcpProcess is "codemode mcp args" in a process of its own (this test
// binary, see mainEnv) with $CODEMODE_ENGINE_WASM set to engine: the
// engine is resolved once per process, so a broken one cannot be tried
// in this one.
func mcpProcess(t *testing.T, engine string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sargs, _ := json.Marshal(append([]string{"--cache-dir", engineCache}, args...))
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), mainEnv+"=1", argsEnv+"="+string(sargs), enginebin.EnvWasm+"="+engine)
	return cmd
}

// TestMCPBrokenEngineFailsClosed: without --fallback, an engine that
// cannot start ends codemode mcp with status 1 and the reason, before it
// serves anything.
func TestMCPBrokenEngineFailsClosed(t *testing.T) {
	for _, args := range [][]string{nil, {"--fallback", "none"}} {
		cmd := mcpProcess(t, brokenEngine(t), args...)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitFailure {
			t.Fatalf("%v: got %v, want exit status %d\n%s", args, err, exitFailure, stderr.String())
		}
		for _, want := range []string{"is not the pinned engine build", "unset " + enginebin.EnvWasm} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr.String())
			}
		}
		if strings.Contains(stderr.String(), "serving") {
			t.Errorf("%v: it served:\n%s", args, stderr.String())
		}
	}
}

// directClient starts codemode mcp with a broken engine and args, and
// connects a client; changed receives its tools/list_changed.
func directClient(t *testing.T, args ...string) (cs *mcpsdk.ClientSession, changed <-chan struct{}, stderr *syncBuffer) {
	t.Helper()
	cmd := mcpProcess(t, brokenEngine(t), args...)
	stderr = &syncBuffer{}
	cmd.Stderr = stderr
	ch := make(chan struct{}, 16)
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) {
			select {
			case ch <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(context.Background(), &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, ch, stderr
}

// toolsWhen lists the tools until ok accepts them (the --config servers
// connect in the background), and returns them.
func toolsWhen(t *testing.T, cs *mcpsdk.ClientSession, changed <-chan struct{}, stderr *syncBuffer, ok func(map[string]*mcpsdk.Tool) bool) map[string]*mcpsdk.Tool {
	t.Helper()
	give := time.After(2 * time.Minute) // a guard against hanging, not a measure
	for {
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatalf("tools/list: %v\n%s", err, stderr)
		}
		tools := map[string]*mcpsdk.Tool{}
		for _, tool := range list.Tools {
			tools[tool.Name] = tool
		}
		if ok(tools) {
			return tools
		}
		select {
		case <-changed:
		case <-give:
			t.Fatalf("the tools never came: %v\n%s", slices.Sorted(maps.Keys(tools)), stderr)
		}
	}
}

// TestMCPFallbackDirect: with --fallback direct and a broken engine, the
// everything server's tools are served one by one, with their schemas and
// annotations, calls reach the server and its result comes back as it
// sent it; one warning says why.
func TestMCPFallbackDirect(t *testing.T) {
	cfg := everythingConfig(t)
	cs, changed, stderr := directClient(t, "--config", cfg, "--fallback", "direct")
	tools := toolsWhen(t, cs, changed, stderr, func(m map[string]*mcpsdk.Tool) bool { return m["everything__echo"] != nil })
	if tools["execute"] != nil {
		t.Errorf("execute is served without an engine")
	}
	echo := tools["everything__echo"]
	if echo.Description != "Echoes back the input string" || echo.Annotations == nil || !echo.Annotations.ReadOnlyHint {
		t.Errorf("echo is described as %q with annotations %+v", echo.Description, echo.Annotations)
	}
	schema, _ := json.Marshal(echo.InputSchema)
	if !strings.Contains(string(schema), `"message"`) {
		t.Errorf("echo's input schema is %s", schema)
	}
	if tools["everything__get-sum"] == nil {
		t.Errorf("get-sum is not served: %v", slices.Sorted(maps.Keys(tools)))
	}

	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("echo answered %+v", res)
	}
	if text, ok := res.Content[0].(*mcpsdk.TextContent); !ok || text.Text != "Echo: hi" {
		t.Errorf("echo answered %#v, want the server's text", res.Content[0])
	}
	// The server's own refusal comes back as its error.
	res, err = cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": "one"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError {
		t.Errorf("get-sum with a string took it: %+v", res)
	}

	warn := logLine(stderr.String(), "level=WARN", "the engine cannot start")
	if warn == "" || !strings.Contains(warn, "without code mode") || !strings.Contains(warn, "not the pinned engine build") {
		t.Errorf("no warning with the reason:\n%s", stderr)
	}
	if n := strings.Count(stderr.String(), "the engine cannot start"); n != 1 {
		t.Errorf("the warning is given %d times:\n%s", n, stderr)
	}
}

// TestMCPFallbackPolicy: a tool --policy denies or asks about is not
// served directly, and cannot be called by its name; the others are.
func TestMCPFallbackPolicy(t *testing.T) {
	cfg := everythingConfig(t)
	cs, changed, stderr := directClient(t, "--config", cfg, "--fallback", "direct",
		"--policy", "default=allow,everything.echo=deny,everything.get-sum=ask")
	tools := toolsWhen(t, cs, changed, stderr, func(m map[string]*mcpsdk.Tool) bool { return m["everything__get-tiny-image"] != nil })
	for _, name := range []string{"everything__echo", "everything__get-sum"} {
		if tools[name] != nil {
			t.Errorf("%s is served against the policy", name)
		}
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: name, Arguments: map[string]any{"message": "hi", "a": 1, "b": 2}})
		if err == nil && !res.IsError {
			t.Errorf("%s could be called: %+v", name, res)
		}
	}
	if line := logLine(stderr.String(), "level=WARN", "tools not served directly"); !strings.Contains(line, "everything.echo") || !strings.Contains(line, "everything.get-sum") {
		t.Errorf("the withheld tools are not logged:\n%s", stderr)
	}
}

// TestMCPFallbackOnlyWhenEngineFails: with a working engine, --fallback
// direct changes nothing: the server is the code-mode one.
func TestMCPFallbackOnlyWhenEngineFails(t *testing.T) {
	cfg := everythingConfig(t)
	cs, stderr, exit := startStdio(t, context.Background(), "--config", cfg, "--fallback", "direct")
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "execute" {
		t.Errorf("got tools %v, want execute alone", list.Tools)
	}
	isErr, v := callExecute(t, cs, `return await tools.everything.echo({ message: "x" })`)
	if isErr || v["value"] != "Echo: x" {
		t.Errorf("result = %v\n%s", v, stderr)
	}
	_ = cs.Close()
	if code := <-exit; code != exitOK {
		t.Errorf("exit %d", code)
	}
	if strings.Contains(stderr.String(), "the engine cannot start") {
		t.Errorf("fell back with a working engine:\n%s", stderr)
	}
}

// TestMCPFallbackUsage: --fallback takes none or direct.
func TestMCPFallbackUsage(t *testing.T) {
	var stderr syncBuffer
	if code := runMCP(context.Background(), []string{"--fallback", "tools"}, strings.NewReader(""), &syncBuffer{}, &stderr); code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr.String(), `--fallback "tools": want none or direct`) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}
