package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The official conformance suite's client scenarios run a client command
// with the URL of a server of theirs. The command is this test binary,
// which, with clientDriverEnv set, acts as a model would: it writes a
// config naming that server and runs, through codemode run, a program
// that lists the server's tools and calls each.
const clientDriverEnv = "CODEMODE_TEST_CLIENT_DRIVER"

func init() {
	if os.Getenv(clientDriverEnv) == "1" {
		os.Exit(clientDriver(os.Args[len(os.Args)-1]))
	}
}

// clientDriver is codemode as the client under test, against url.
func clientDriver(url string) int {
	dir, err := os.MkdirTemp("", "codemode-client-conformance-")
	if err != nil {
		return 1
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "config.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"conf": map[string]any{"url": url}}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		return 1
	}
	// Each fixture tool gets the input its scenario expects; others {}.
	const program = `const inputs = { add_numbers: { a: 5, b: 3 } }
const out = {}
for (const name of Object.keys(tools.conf)) out[name] = await tools.conf[name](inputs[name] ?? {})
return out`
	prog := filepath.Join(dir, "program.js")
	if err := os.WriteFile(prog, []byte(program), 0o600); err != nil {
		return 1
	}
	args := []string{"run", "--config", cfg, "--timeout", "20s"}
	if cache := os.Getenv("CODEMODE_TEST_CACHE"); cache != "" {
		args = append(args, "--cache-dir", cache)
	}
	code := Run(append(args, prog), os.Stdin, os.Stdout, os.Stderr)
	fmt.Fprintf(os.Stderr, "codemode run exited %d\n", code)
	return code
}

// TestMCPClientConformance runs the suite's client scenarios that apply
// to codemode as a client of URL servers (see the README for those that
// do not) with codemode run as the client.
func TestMCPClientConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a client process per scenario")
	}
	_, root := nodeSetup(t)
	node22 := filepath.Join(root, "node_modules", "node22", "bin", "node")
	if _, err := os.Stat(node22); err != nil {
		t.Fatalf("node 22 is missing (npm ci installs it as node22): %v", err)
	}
	suite := filepath.Join(root, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, scenario := range []string{"initialize", "tools_call", "sse-retry"} {
		t.Run(scenario, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node22, suite, "client", "--scenario", scenario, "--command", os.Args[0], "-o", out, "--timeout", "60000")
			cmd.Env = append(os.Environ(), clientDriverEnv+"=1", "CODEMODE_TEST_CACHE="+engineCache)
			cmd.Dir = out
			output, err := cmd.CombinedOutput()
			summary := conformanceSummary(t, out)
			t.Logf("%s", summary)
			if err != nil || strings.Contains(summary, "FAILURE") || strings.Contains(summary, "WARNING") || !strings.HasSuffix(summary, " PASS") {
				t.Errorf("scenario %s: %v\n%s\nresults:\n%s", scenario, err, tail(string(output), 4000), summary)
			}
		})
	}
}
