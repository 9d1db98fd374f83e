package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A config that lists codemode itself does not start codemode after
// codemode: a server that is this executable is not started (and is an
// error under --require-all), and one that reaches codemode through a
// wrapper starts one more codemode, whose own copy of the config is then
// refused, so the chain ends.
func TestConfigListingCodemode(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "p.js")
	if err := os.WriteFile(prog, []byte(`return Object.keys(tools)`), 0o600); err != nil {
		t.Fatal(err)
	}

	direct := writeConfig(t, map[string]any{"mcpServers": map[string]any{"me": map[string]any{"command": exe, "args": []string{"mcp"}}}})
	var out, errb bytes.Buffer
	if code := Run([]string{"run", "--config", direct, "--cache-dir", engineCache, prog}, strings.NewReader(""), &out, &errb); code != exitOK ||
		!strings.Contains(errb.String(), "is codemode itself and was not started") {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	errb.Reset()
	if code := Run([]string{"run", "--require-all", "--config", direct, "--cache-dir", engineCache, prog}, strings.NewReader(""), &out, &errb); code == exitOK ||
		!strings.Contains(errb.String(), `the server "me" is codemode itself`) {
		t.Fatalf("--require-all: exit %d\n%s", code, errb.String())
	}

	// Through a shell, which the executable check cannot see through:
	// the shell notes each start in a file.
	starts := filepath.Join(dir, "starts")
	cfgPath := filepath.Join(dir, "wrapped.json")
	args, _ := json.Marshal([]string{"--require-all", "--config", cfgPath, "--cache-dir", engineCache})
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"wrapped": map[string]any{
		"command": "/bin/sh", "args": []string{"-c", `echo start >> "$1"; exec "$0"`, exe, starts},
		"env": map[string]string{mainEnv: "1", argsEnv: string(args)},
	}}})
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	code := Run([]string{"run", "--config", cfgPath, "--cache-dir", engineCache, prog}, strings.NewReader(""), &out, &errb)
	// The first wrapped codemode started and started a second, which
	// refused its config: the first failed (--require-all), and the run
	// went on without it.
	b, _ := os.ReadFile(starts)
	if code != exitOK || strings.Count(string(b), "start") != 2 || !strings.Contains(out.String(), `"value":["$codemode"]`) {
		t.Fatalf("exit %d, %d starts\n%s\n%s", code, strings.Count(string(b), "start"), out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "started by codemode 2 levels up") {
		t.Errorf("the refusal is not in the log:\n%s", errb.String())
	}
}
