package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode/internal/oauthtest"
	"github.com/codemode-go/codemode/internal/secret"
	"github.com/codemode-go/codemode/mcp"
)

// browserTestEnv makes the test binary a "browser" that approves at once:
// it GETs its last argument, the authorization URL, following the
// redirect to codemode login's listener. codemode login starts it as
// $BROWSER.
const browserTestEnv = "CODEMODE_TEST_BROWSER"

func init() {
	if os.Getenv(browserTestEnv) != "1" {
		return
	}
	resp, err := http.Get(os.Args[len(os.Args)-1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "browser:", err)
		os.Exit(1)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		os.Exit(1)
	}
	os.Exit(0)
}

// useTestBrowser makes codemode login open URLs with the test binary.
func useTestBrowser(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", exe)
	t.Setenv(browserTestEnv, "1")
}

func runLogin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(append([]string{"login"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestLoginThenMCP: codemode mcp reports a server that needs OAuth as
// unavailable, naming the login command, without trying HTTP+SSE;
// codemode login authorizes in the "browser" and stores the token
// privately; codemode mcp then calls the server's tools with it,
// refreshing it as it expires, and a tool that needs more scope says to
// log in again, after which it works in the same session.
func TestLoginThenMCP(t *testing.T) {
	// The token goes to the process's configuration directory (TestMain):
	// this test's is removed after it, so that it can run again in the
	// same process (-count) and find one token, its own.
	t.Cleanup(func() {
		root, _ := secret.Root()
		files, _ := filepath.Glob(filepath.Join(root, "tokens", "secure-*.json"))
		for _, f := range files {
			_ = os.Remove(f)
		}
	})
	srv := oauthtest.New(t, oauthtest.Options{TokenTTL: 2 * time.Second})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.json")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `{"mcpServers": {"secure": {"url": %q}}}`, srv.MCPURL), 0o644); err != nil {
		t.Fatal(err)
	}
	hint := "codemode login secure --config " + cfg

	// Before the login.
	cs, stderr, _ := startStdio(t, context.Background(), "--config", cfg)
	d := settledDescription(t, cs)
	if !strings.Contains(d, "## Unavailable tools") || !strings.Contains(d, "`tools.secure`: it needs an OAuth authorization") || !strings.Contains(d, hint) {
		t.Errorf("description:\n%s", tail(d, 1500))
	}
	isErr, v := callExecute(t, cs, `return await tools.secure.whoami({})`)
	if msg := fmt.Sprint(v["error"]); !isErr || !strings.Contains(msg, hint) {
		t.Errorf("call before the login: %v", v)
	}
	if line := logLine(stderr.String(), "level=ERROR", "server=secure"); !strings.Contains(line, hint) {
		t.Errorf("no error record naming the login:\n%s", stderr)
	}
	if strings.Contains(stderr.String(), "SSE") {
		t.Errorf("HTTP+SSE was tried:\n%s", stderr)
	}
	t.Logf("description's end:\n%s\nlog:\n%s", tail(d, 500), stderr)
	_ = cs.Close()
	if c := srv.Counts(); c.Registrations != 0 || c.Authorizations != 0 {
		t.Errorf("codemode mcp started an authorization: %+v", c)
	}

	// The login.
	useTestBrowser(t)
	code, out, errOut := runLogin(t, "secure", "--config", cfg)
	if code != exitOK || !strings.Contains(out, `codemode is authorized to "secure"`) || !strings.Contains(errOut, "Open this URL") {
		t.Fatalf("login: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	t.Logf("login stdout:\n%s\nlogin stderr:\n%s", out, errOut)
	root, _ := secret.Root()
	tokens := filepath.Join(root, "tokens")
	files, _ := filepath.Glob(filepath.Join(tokens, "secure-*.json"))
	if len(files) != 1 {
		t.Fatalf("token files %v", files)
	}
	if runtime.GOOS != "windows" {
		for path, want := range map[string]os.FileMode{tokens: 0o700, files[0]: 0o600} {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: %v, want mode %04o", path, fi.Mode(), want)
			}
		}
	}
	stored, _ := os.ReadFile(files[0])

	// After it.
	cs, stderr, _ = startStdio(t, context.Background(), "--config", cfg)
	defer cs.Close()
	if d := settledDescription(t, cs); strings.Contains(d, "`tools.secure`") {
		t.Errorf("still unavailable:\n%s", tail(d, 1500))
	}
	isErr, v = callExecute(t, cs, `return await tools.secure.whoami({})`)
	if isErr || !strings.Contains(fmt.Sprint(v["value"]), "hello user-1") {
		t.Fatalf("whoami: %v\n%s", v, stderr)
	}
	if srv.Counts().Refreshes == 0 {
		t.Errorf("the expired token was not refreshed: %+v", srv.Counts())
	}
	if now, _ := os.ReadFile(files[0]); bytes.Equal(now, stored) {
		t.Error("the refreshed token was not stored")
	}
	isErr, v = callExecute(t, cs, `return await tools.secure.echo_auth({})`)
	if isErr || fmt.Sprint(v["value"]) != "you sent Bearer [REDACTED]" {
		t.Errorf("echo_auth: %v", v)
	}

	// Step-up.
	isErr, v = callExecute(t, cs, `return await tools.secure.admin({})`)
	if msg := fmt.Sprint(v["error"]); !isErr || !strings.Contains(msg, oauthtest.ScopeAdmin) || !strings.Contains(msg, hint) {
		t.Errorf("admin before the step-up: %v", v)
	}
	if code, out, errOut := runLogin(t, "secure", "--config", cfg); code != exitOK || !strings.Contains(out, oauthtest.ScopeAdmin) {
		t.Fatalf("second login: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	isErr, v = callExecute(t, cs, `return await tools.secure.admin({})`)
	if isErr || fmt.Sprint(v["value"]) != "admin done" {
		t.Errorf("admin after the step-up: %v\n%s", v, stderr)
	}
	if strings.Contains(stderr.String(), "at-") || strings.Contains(stderr.String(), "rt-") {
		t.Errorf("a token is in the log:\n%s", stderr)
	}
}

func TestLoginUsageErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "servers.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"local": {"command": "x"}, "keyed": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, exitUsage, "want exactly one server NAME"},
		{[]string{"x"}, exitUsage, "--config FILE is required"},
		{[]string{"nope", "--config", cfg}, exitFailure, `no server "nope" in the config (it has keyed, local)`},
		{[]string{"local", "--config", cfg}, exitFailure, "OAuth is for URL servers"},
		{[]string{"keyed", "--config", cfg}, exitFailure, "has an Authorization header configured"},
	} {
		code, _, errOut := runLogin(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// TestREADMEOAuthConfig: the README's OAuth example is a valid config,
// its secret taken from the environment.
func TestREADMEOAuthConfig(t *testing.T) {
	t.Setenv("GITHUB_OAUTH_SECRET", "s3cret")
	cfg, err := mcp.ParseConfig([]byte(readmeBlock(t, "oauth-config")))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings %v", cfg.Warnings)
	}
	if o := cfg.Servers["github"].OAuth; o == nil || o.ClientSecret != "s3cret" || o.ClientID == "" {
		t.Errorf("github oauth %+v", o)
	}
}
