package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
	return m
}

func TestRun(t *testing.T) {
	cache := t.TempDir()
	file := filepath.Join(t.TempDir(), "p.ts")
	if err := os.WriteFile(file, []byte("const n: number = 6 * 7\nconsole.log('hi')\nreturn n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		exit  int
		check func(m map[string]any) bool
	}{
		{"file", "", []string{"run", "--cache-dir", cache, file}, 0,
			func(m map[string]any) bool { return m["ok"] == true && m["value"] == 42.0 }},
		{"stdin", "return [1, 2]", []string{"run", "--cache-dir", cache, "-"}, 0,
			func(m map[string]any) bool { return m["ok"] == true }},
		{"timeout", "for (;;) {}", []string{"run", "--timeout", "100ms", "--cache-dir", cache, "-"}, 1,
			func(m map[string]any) bool { return m["error"].(map[string]any)["kind"] == "TimeoutExceeded" }},
		{"plain integer memory", "return 'x'.repeat(2 ** 27).length", []string{"run", "--max-memory", "16777216", "--cache-dir", cache, "-"}, 1,
			func(m map[string]any) bool { return m["error"].(map[string]any)["kind"] == "MemoryLimitExceeded" }},
		{"memory with unit", "return 1", []string{"run", "--max-memory", "32MiB", "--cache-dir", cache, "-"}, 0,
			func(m map[string]any) bool { return m["ok"] == true }},
		{"no tool limit", "return await tools.shop.listOrders({})", []string{"run", "--demo-tools", "--max-tool-calls", "none", "--cache-dir", cache, "-"}, 0,
			func(m map[string]any) bool { return m["ok"] == true }},
		{"tool limit", "await tools.shop.listOrders({}); return await tools.shop.listOrders({})", []string{"run", "--demo-tools", "--max-tool-calls", "1", "--cache-dir", cache, "-"}, 1,
			func(m map[string]any) bool { return m["error"].(map[string]any)["kind"] == "ToolCallLimitExceeded" }},
		{"output limit", "return 'z'.repeat(100)", []string{"run", "--max-output-bytes", "10", "--cache-dir", cache, "-"}, 0,
			func(m map[string]any) bool { return m["truncated"] == true }},
		{"program failure", "throw new Error('x')", []string{"run", "--no-cache", "-"}, 1,
			func(m map[string]any) bool { return m["ok"] == false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.stdin, tc.args...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.exit, out, errs)
			}
			if m := decode(t, out); !tc.check(m) {
				t.Errorf("unexpected result: %s", out)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"run"},
		{"run", "a.js", "b.js"},
		{"run", "--timeout", "soon", "-"},
		{"run", "--max-memory", "lots", "-"},
		{"run", "/no/such/file.js"},
		{"run", "--max-memory", "1", "-"},
		{"demo", "extra"},
	} {
		if code, _, errs := runCLI(t, "return 1", args...); code != 2 || errs == "" {
			t.Errorf("%q: exit %d (stderr %q), want 2 with a message", args, code, errs)
		}
	}
	if code, out, _ := runCLI(t, "", "help"); code != 0 || !strings.Contains(out, "Usage") {
		t.Errorf("help: exit %d", code)
	}
}

func TestDemo(t *testing.T) {
	code, out, errs := runCLI(t, "", "demo", "--cache-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	m := decode(t, out)
	calls, _ := m["toolCalls"].([]any)
	if m["ok"] != true || len(calls) != 4 || !strings.Contains(errs, "listOrders") {
		t.Errorf("demo output: %s", out)
	}
}

func TestOpenAPISource(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "api.yaml")
	if err := os.WriteFile(spec, []byte(`openapi: 3.1.0
info: {title: Widget API, version: "1"}
servers: [{url: "http://127.0.0.1:1"}]
components:
  securitySchemes:
    key: {type: apiKey, in: header, name: X-Key}
security: [{key: []}]
paths:
  /widgets/{id}:
    get:
      operationId: widgets.get
      summary: Get a widget
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object, properties: {id: {type: string}}}}}}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "", "catalog", "--openapi", spec)
	if code != 0 || !strings.Contains(out, `"path":"widget.widgets.get"`) {
		t.Fatalf("catalog: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = runCLI(t, "", "search", "--openapi", spec+"=w", "widget")
	if code != 0 || !strings.Contains(out, `"tools.w.widgets.get"`) {
		t.Errorf("search with namespace: exit %d\n%s", code, out)
	}
	// Credentials come from named environment variables, which must exist.
	if code, _, errs := runCLI(t, "", "catalog", "--openapi", spec, "--apikey-env", "key=CODEMODE_TEST_UNSET_VAR"); code != 2 || !strings.Contains(errs, "CODEMODE_TEST_UNSET_VAR") {
		t.Errorf("unset env: exit %d, %q", code, errs)
	}
	if code, _, _ := runCLI(t, "", "catalog", "--openapi", "/no/such/spec.yaml"); code != 2 {
		t.Errorf("missing spec: exit %d", code)
	}
	// A call without the credential says which flag gives it.
	code, out, errs = runCLI(t, `return await tools.widget.widgets.get({ id: "w1" }).catch((e) => e.message)`, "run", "--openapi", spec, "-")
	if v := decode(t, out); code != 0 || !strings.Contains(fmt.Sprint(v["value"]), "start codemode with --apikey-env key=NAME, where NAME is an environment variable") {
		t.Errorf("got exit %d, %s %s; want the message to name --apikey-env key=NAME", code, out, errs)
	}
}

// TestUsageMessages: a usage error is one line with the nearest name,
// and a pointer to the help, not the help itself.
func TestUsageMessages(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rn"}, `codemode: unknown command "rn"; did you mean run?` + "\nRun \"codemode help\" for the commands.\n"},
		{[]string{"run", "--timout", "5s", "-"}, "codemode run: unknown flag --timout; did you mean --timeout?\nRun \"codemode run -h\" for its usage and flags.\n"},
		{[]string{"resume", "--suspend-dir", "x"}, "codemode resume: unknown flag --suspend-dir\nRun \"codemode resume -h\" for its usage and flags.\n"},
		{[]string{"mcp", "--htp", "127.0.0.1:0"}, "codemode mcp: unknown flag --htp; did you mean --http?\n"},
		{[]string{"run", "--timeout"}, "codemode run: --timeout needs a value\n"},
		{[]string{"run", "--pretty=maybe", "-"}, `codemode run: --pretty maybe: want true or false, as in --pretty=false`},
		{[]string{"run"}, "codemode run: want exactly one FILE (or - for standard input), got 0\nRun \"codemode run -h\""},
		{[]string{"engine", "instal"}, `codemode engine: unknown command "instal"; did you mean install?`},
		{[]string{"engine", "verify", "--cache"}, "codemode engine verify: unknown flag --cache; did you mean --cache-dir?"},
		// opencode's maxToolCalls 0 allows no calls; codemode's options
		// read 0 as no limit: the flag takes neither meaning silently.
		{[]string{"run", "--max-tool-calls", "0", "-"}, "codemode run: --max-tool-calls 0: 0 is ambiguous"},
		{[]string{"mcp", "--max-output-bytes", "0"}, "write none for no limit"},
		{[]string{"run", "--max-tool-calls", "-3", "-"}, `"-3" is not a positive number or none`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errs := runCLI(t, "", tc.args...)
			if code != exitUsage || !strings.Contains(errs, tc.want) {
				t.Errorf("got exit %d, stderr:\n%s\nwant exit %d and %q", code, errs, exitUsage, tc.want)
			}
			if n := strings.Count(errs, "\n"); n > 2 {
				t.Errorf("got %d lines, want at most 2:\n%s", n, errs)
			}
		})
	}
}

// TestToolsFromConfig: run, catalog, search and instructions load MCP
// servers from --config as codemode mcp does, with flags before or after
// their arguments; the program calls the real everything server.
func TestToolsFromConfig(t *testing.T) {
	cfg := everythingConfig(t)
	cache := t.TempDir()
	prog := filepath.Join(t.TempDir(), "prog.ts")
	const code = `const [e, s] = await Promise.all([tools.everything.echo({ message: "hi" }), tools.everything["get-sum"]({ a: 1, b: 2 })])
return e + " / " + s`
	if err := os.WriteFile(prog, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	const value = `"value":"Echo: hi / The sum of 1 and 2 is 3."`
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"run file, flags after it", "", []string{"run", prog, "--config", cfg, "--timeout", "20s", "--cache-dir", cache}, value},
		{"run stdin, flags first", code, []string{"run", "--config", cfg, "--cache-dir", cache, "-"}, value},
		{"catalog", "", []string{"catalog", "--config", cfg, "--cache-dir", cache}, `"path":"everything.echo"`},
		{"search, query first", "", []string{"search", "sum", "--config", cfg, "--limit", "1", "--cache-dir", cache}, `"path":"tools.everything[\"get-sum\"]"`},
		{"instructions", "", []string{"instructions", "--config", cfg, "--cache-dir", cache}, "get-sum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.stdin, tc.args...)
			if code != exitOK || !strings.Contains(out, tc.want) {
				t.Errorf("got exit %d, stdout %s\nstderr %s\nwant exit 0 and %s", code, tail(out, 1000), errs, tc.want)
			}
		})
	}
}

// TestConfigWarningsAndVariables: a config field codemode does not use is
// a warning naming the server and the field; a server that needs an unset
// variable is an error naming it, fatal only under --require-all.
func TestConfigWarningsAndVariables(t *testing.T) {
	nodeBin, root := nodeSetup(t)
	t.Setenv("CODEMODE_TEST_SECRET_TOKEN", "must-not-be-logged-0123456789")
	cfg := writeConfig(t, map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{
			"command": nodeBin, "args": []string{filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")},
			"env":         map[string]string{"API_TOKEN": "${CODEMODE_TEST_SECRET_TOKEN}"},
			"autoApprove": []string{"echo"},
		},
		"needy": map[string]any{"command": nodeBin, "env": map[string]string{"TOKEN": "${CODEMODE_TEST_UNSET_VARIABLE}"}},
	}})
	cache := t.TempDir()
	code, out, errs := runCLI(t, "", "catalog", "--config", cfg, "--cache-dir", cache)
	if code != exitOK || !strings.Contains(out, `"path":"everything.echo"`) {
		t.Errorf("got exit %d, stdout %s, want 0 and the everything tools\n%s", code, tail(out, 500), errs)
	}
	for _, want := range [][]string{
		{"level=WARN", `msg="config field ignored"`, "server=everything", "field=autoApprove"},
		{"level=ERROR", "server=needy", "env.TOKEN: the environment variable CODEMODE_TEST_UNSET_VARIABLE is not set"},
	} {
		if logLine(errs, want...) == "" {
			t.Errorf("got stderr without a line with %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "must-not-be-logged") {
		t.Errorf("got the secret in the log:\n%s", errs)
	}
	// The instructions are what the model reads: they say so too.
	code, out, _ = runCLI(t, "", "instructions", "--config", cfg, "--cache-dir", cache)
	if want := "- `tools.needy`: env.TOKEN: the environment variable CODEMODE_TEST_UNSET_VARIABLE is not set"; code != exitOK || !strings.Contains(out, want) {
		t.Errorf("got exit %d, instructions ending %s; want 0 and %q", code, tail(out, 500), want)
	}
	code, _, errs = runCLI(t, "", "catalog", "--config", cfg, "--cache-dir", cache, "--require-all")
	if want := `server "needy": env.TOKEN: the environment variable CODEMODE_TEST_UNSET_VARIABLE is not set`; code != exitFailure || !strings.Contains(errs, want) {
		t.Errorf("got exit %d, stderr %s; want %d and %q", code, errs, exitFailure, want)
	}
}

// TestBareDurationRefused: "--timeout 5" is refused with the spelling
// that was probably meant, in every command that takes a duration.
func TestBareDurationRefused(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--timeout", "5", "-"},
		{"run", "-", "--connect-timeout", "5"},
		{"instructions", "--timeout", "5"},
	} {
		code, _, errs := runCLI(t, "return 1", args...)
		if code != exitUsage || !strings.Contains(errs, `"5" has no unit: write 5s`) {
			t.Errorf("%q: got exit %d, stderr %q; want %d suggesting 5s", args, code, errs, exitUsage)
		}
	}
}

// TestREADMEOpenAPIExample runs the README's OpenAPI example as written
// there: the demo API served by one process, its document written out,
// and a program run against it by another with the token named by
// --bearer-env; without the token the call says which flag gives it.
func TestREADMEOpenAPIExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- openapi-example -->\n```sh\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || block == "" {
		t.Fatal("the README has no openapi-example block")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("SHOP_TOKEN", "token-for-the-readme-test")
	// The program comes from the heredoc; each codemode line runs as a
	// process of its own, the one ending in & in the background.
	var program strings.Builder
	heredoc := false
	var runs [][]string
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, "cat > open-orders.js"):
			heredoc = true
		case heredoc && line == "JS":
			heredoc = false
			if err := os.WriteFile("open-orders.js", []byte(program.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		case heredoc:
			program.WriteString(line + "\n")
		case strings.HasPrefix(line, "codemode demo --serve"):
			args := strings.Fields(strings.TrimSuffix(line, "&"))[1:]
			serveInBackground(t, args...)
		case strings.HasPrefix(line, "codemode run"):
			line, _, _ = strings.Cut(line, "#")
			runs = append(runs, append(strings.Fields(line)[1:], "--cache-dir", engineCache))
		}
	}
	if len(runs) != 2 {
		t.Fatalf("got %d codemode run lines, want 2:\n%s", len(runs), block)
	}
	code, out, errs := codemodeProcess(t, "", runs[0]...)
	if code != exitOK || !strings.Contains(out, `"customer": "Ada Lovelace"`) {
		t.Errorf("first run: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = codemodeProcess(t, "", runs[1]...)
	if code != exitFailure || !strings.Contains(out, "start codemode with --bearer-env NAME") {
		t.Errorf("second run: exit %d\n%s\n%s", code, out, errs)
	}
}

// serveInBackground runs codemode with args in a process until the test
// ends, once it says it is serving.
func serveInBackground(t *testing.T, args ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	a, _ := json.Marshal(args)
	cmd.Env = append(os.Environ(), cliEnv+"=1", cliArgsEnv+"="+string(a))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil && strings.Contains(stderr.String(), "address already in use") {
		t.Skipf("the README's port is taken on this machine: %s", stderr.String())
	}
	if err != nil || !strings.Contains(line, "serving the demo shop API") {
		t.Fatalf("codemode %q: got %q, %v\n%s", args, line, err, stderr.String())
	}
}
