package mcp

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
)

// failingServers are real processes that cannot be started, each with
// what the error must say about it.
func failingServers(t *testing.T) map[string]struct {
	cfg  UpstreamConfig
	want []string // in the full error
	why  string   // in the brief reason
} {
	nodeBin := node(t)
	exit := kitConfig(t, nil)
	exit.Env[fakeServerEnv] = "exit"
	type failing = struct {
		cfg  UpstreamConfig
		want []string
		why  string
	}
	return map[string]failing{
		"missing": {
			UpstreamConfig{Command: "/nonexistent/codemode-test-server"},
			[]string{"its command could not be started", "no such file or directory"},
			"its command could not be started",
		},
		"notonpath": {
			UpstreamConfig{Command: "codemode-test-no-such-command"},
			[]string{"its command could not be started", "executable file not found"},
			"executable file not found",
		},
		"crash": {
			UpstreamConfig{Command: nodeBin, Args: []string{"-e", "console.error('FATAL: no API key given'); process.exit(3)"}},
			[]string{"its command exited with status 3 before completing the MCP handshake", "its stderr ended with: FATAL: no API key given"},
			"exited with status 3",
		},
		"dies": {
			exit,
			[]string{"its command exited with status 7 before completing the MCP handshake"},
			"exited with status 7",
		},
		"hang": {
			UpstreamConfig{Command: nodeBin, Args: []string{"-e", "console.error('warming up'); setInterval(() => {}, 1000)"}},
			[]string{"it did not answer within 2s", "longer connect timeout", "its stderr ended with: warming up"},
			"did not answer within 2s",
		},
	}
}

// TestConnectFailureReasons: with one good server and real processes
// that cannot start, strict Connect fails naming each with a reason a
// person can act on (exit status and stderr, not "initialize: EOF"), and
// lenient Connect serves the good one, logs each failure at error level
// and lists the others as unavailable with a brief reason.
func TestConnectFailureReasons(t *testing.T) {
	failing := failingServers(t)
	cfg := &Config{Servers: map[string]UpstreamConfig{"good": kitConfig(t, nil)}}
	for name, f := range failing {
		cfg.Servers[name] = f.cfg
	}
	opts := ClientOptions{ConnectTimeout: 2 * time.Second}

	_, err := Connect(context.Background(), cfg, opts)
	if err == nil {
		t.Fatal("got a strict Connect that succeeded, want an error")
	}
	for name, f := range failing {
		line := grepLine(err.Error(), `server "`+name+`"`)
		for _, want := range f.want {
			if !strings.Contains(line, want) {
				t.Errorf("strict: got %q for %s, want it to contain %q", line, name, want)
			}
		}
	}
	if strings.Contains(err.Error(), `server "good"`) || strings.Contains(err.Error(), "EOF") {
		t.Errorf("strict: got %q, want no mention of the good server and no bare EOF", err)
	}

	logger, logs := newLogRecorder()
	opts.Lenient, opts.Logger = true, logger
	up := connect(t, cfg, opts)
	res, m := run(t, up.Tools(), codemode.Options{}, `return await tools.good.echo({ ok: true })`)
	mustOK(t, res)
	if got, _ := json.Marshal(m["value"]); string(got) != `{"ok":true}` {
		t.Errorf("lenient: got %s from the good server, want {\"ok\":true}", got)
	}
	got := map[string]Unavailable{}
	for _, u := range up.Unavailable() {
		got[u.Namespace] = u
	}
	if len(got) != len(failing) {
		t.Errorf("lenient: got %d unavailable servers, want %d: %v", len(got), len(failing), got)
	}
	for name, f := range failing {
		u := got[name]
		if !strings.Contains(u.Reason, f.why) || strings.Contains(u.Reason, "stderr") {
			t.Errorf("lenient: got reason %q for %s, want a brief one containing %q", u.Reason, name, f.why)
		}
		if u.Err == nil || !strings.Contains(u.Err.Error(), f.want[0]) {
			t.Errorf("lenient: got error %v for %s, want it to contain %q", u.Err, name, f.want[0])
		}
		logged := false
		for _, l := range strings.Split(logs(), "\n") {
			logged = logged || strings.HasPrefix(l, "ERROR the server did not start") && strings.Contains(l, f.want[0]) && strings.HasSuffix(l, "server="+name)
		}
		if !logged {
			t.Errorf("lenient: %s's failure is not logged at error level with its reason:\n%s", name, logs())
		}
		if tools := up.Tools()[name].(codemode.Tools); len(tools) != 0 {
			t.Errorf("lenient: got tools %v for %s, want none", keys(tools), name)
		}
	}
}

// TestConnectTypoedNpxPackage: a mistyped package name makes npx print
// npm's error and exit; the error quotes npm's lines, not the EOF the
// handshake saw. It needs npx, and the registry (or its absence: offline,
// npm fails as clearly).
func TestConnectTypoedNpxPackage(t *testing.T) {
	node(t)
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("npx is not on PATH")
	}
	cfg := &Config{Servers: map[string]UpstreamConfig{"typo": {
		Command: npx, Args: []string{"-y", "@modelcontextprotocol/server-everythingg-codemode-test"},
		// No retries: offline, npm would otherwise retry for minutes.
		Env: map[string]string{"npm_config_fetch_retries": "0", "npm_config_cache": t.TempDir()},
	}}}
	_, err = Connect(context.Background(), cfg, ClientOptions{ConnectTimeout: 60 * time.Second})
	if err == nil {
		t.Fatal("got a Connect that succeeded, want an error")
	}
	for _, want := range []string{`server "typo"`, "its command exited with status 1", "npm error"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to contain %q", err, want)
		}
	}
}

// TestConnectLateArrival: a server that fails at first is retried in the
// background; when it starts, Changed signals, its tools appear and it is
// no longer listed as unavailable.
func TestConnectLateArrival(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ready")
	late := kitConfig(t, map[string]string{fakeServerEnv: "late", fakeServerEnv + "_MARKER": marker})
	logger, logs := newLogRecorder()
	up := connect(t, &Config{Servers: map[string]UpstreamConfig{"good": kitConfig(t, nil), "late": late}},
		ClientOptions{Lenient: true, Logger: logger})
	un := up.Unavailable()
	if len(un) != 1 || un[0].Namespace != "late" || !strings.Contains(un[0].Err.Error(), "kit: not ready") {
		t.Fatalf("got unavailable %v, want late, with its stderr", un)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-up.Changed():
	case <-time.After(60 * time.Second):
		t.Fatalf("got no change signal within 60s, want one when late starts:\n%s", logs())
	}
	if un := up.Unavailable(); len(un) != 0 {
		t.Errorf("got unavailable %v after the late server started, want none", un)
	}
	res, m := run(t, up.Tools(), codemode.Options{}, `return await tools.late.echo({ late: true })`)
	mustOK(t, res)
	if got, _ := json.Marshal(m["value"]); string(got) != `{"late":true}` {
		t.Errorf("got %s from the late server, want {\"late\":true}", got)
	}
	if !strings.Contains(logs(), "the server is available now tools=19 server=late") {
		t.Errorf("the late arrival is not logged:\n%s", logs())
	}
}

// TestConnectUnsetVariable: a config entry that needs a variable that is
// not set makes that server, not the file, unusable: strict Connect
// fails naming the server, the field and the variable; lenient Connect
// lists it as unavailable and serves the rest.
func TestConnectUnsetVariable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"good":  map[string]any{"command": exe, "args": []string{"-test.run=^$"}, "env": map[string]string{fakeServerEnv: "1"}},
		"needy": map[string]any{"command": exe, "env": map[string]string{"API_TOKEN": "${CODEMODE_TEST_UNSET_VARIABLE}"}},
	}})
	cfg, err := ParseConfig(b)
	if err != nil {
		t.Fatalf("got %v, want the file accepted", err)
	}
	want := `server "needy": env.API_TOKEN: the environment variable CODEMODE_TEST_UNSET_VARIABLE is not set`
	if _, err := Connect(context.Background(), cfg, ClientOptions{}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("strict: got %v, want %q", err, want)
	}
	up := connect(t, cfg, ClientOptions{Lenient: true})
	un := up.Unavailable()
	if len(un) != 1 || un[0].Namespace != "needy" || un[0].Reason != "env.API_TOKEN: the environment variable CODEMODE_TEST_UNSET_VARIABLE is not set" {
		t.Errorf("lenient: got unavailable %+v, want needy naming the variable", un)
	}
	if _, ok := up.Tools()["good"].(codemode.Tools)["echo"]; !ok {
		t.Error("lenient: the good server's tools are missing")
	}
}

// TestStartFailureRedacted: a server that prints its credentials to
// stderr and dies — one from its environment, one from its arguments,
// both expanded from the host's environment — shows neither in the
// error, the reason or the log.
func TestStartFailureRedacted(t *testing.T) {
	nodeBin := node(t)
	const token, key = "tok-Zx9-very-secret-1234", "key-Qw8-also-secret-5678"
	t.Setenv("CODEMODE_TEST_UPSTREAM_TOKEN", token)
	t.Setenv("CODEMODE_TEST_UPSTREAM_KEY", key)
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"leaky": map[string]any{
		"command": nodeBin,
		"args":    []string{"-e", "console.error('token ' + process.env.API_TOKEN + ' args ' + process.argv.slice(1).join(' ')); process.exit(2)", "--", "--key=${CODEMODE_TEST_UPSTREAM_KEY}"},
		"env":     map[string]string{"API_TOKEN": "${env:CODEMODE_TEST_UPSTREAM_TOKEN}"},
	}}})
	cfg, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	logger, logs := newLogRecorder()
	up := connect(t, cfg, ClientOptions{Lenient: true, Logger: logger})
	un := up.Unavailable()
	if len(un) != 1 {
		t.Fatalf("got unavailable %v, want leaky", un)
	}
	for what, text := range map[string]string{"error": un[0].Err.Error(), "reason": un[0].Reason, "log": logs()} {
		if strings.Contains(text, token) || strings.Contains(text, key) {
			t.Errorf("got a secret in the %s:\n%s", what, text)
		}
	}
	if !strings.Contains(un[0].Err.Error(), "token [REDACTED] args") || !strings.Contains(un[0].Err.Error(), "--key=[REDACTED]") {
		t.Errorf("got error %q, want the stderr line with both secrets redacted", un[0].Err)
	}
}

// TestEnvInherit: a server gets the host variables its entry names in
// envInherit, and no others; what it sends back has their values
// redacted, except those of the minimal environment every server gets.
func TestEnvInherit(t *testing.T) {
	t.Setenv("CODEMODE_TEST_INHERITED", "passed")
	t.Setenv("CODEMODE_TEST_NOT_INHERITED", "kept")
	t.Setenv("LANG", "C.UTF-8")
	sc := kitConfig(t, nil)
	sc.EnvInherit = []string{"CODEMODE_TEST_INHERITED", "CODEMODE_TEST_NEVER_SET", "LANG"}
	up := connect(t, &Config{Servers: map[string]UpstreamConfig{"kit": sc}}, ClientOptions{})
	res, m := run(t, up.Tools(), codemode.Options{}, `return await tools.kit.env({})`)
	mustOK(t, res)
	env := m["value"].(map[string]any)
	// Redacted whole: the server got exactly the value.
	if env["CODEMODE_TEST_INHERITED"] != "[REDACTED]" {
		t.Errorf("got CODEMODE_TEST_INHERITED=%v, want [REDACTED]", env["CODEMODE_TEST_INHERITED"])
	}
	if runtime.GOOS != "windows" && env["LANG"] != "C.UTF-8" {
		t.Errorf("got LANG=%v, want C.UTF-8: the minimal environment holds no secrets", env["LANG"])
	}
	for _, name := range []string{"CODEMODE_TEST_NOT_INHERITED", "CODEMODE_TEST_NEVER_SET"} {
		if v, ok := env[name]; ok {
			t.Errorf("got %s=%v, want it absent", name, v)
		}
	}
}

// TestConnectBackground: with Background, Connect returns before a
// server that never answers has: it is listed as connecting, the good
// one arrives with a change signal and serves, and Close stops the one
// still connecting.
func TestConnectBackground(t *testing.T) {
	nodeBin := node(t)
	cfg := &Config{Servers: map[string]UpstreamConfig{
		"good": kitConfig(t, nil),
		"hang": {Command: nodeBin, Args: []string{"-e", "setInterval(() => {}, 1000)"}},
	}}
	start := time.Now()
	up, err := Connect(context.Background(), cfg, ClientOptions{Background: true, ConnectTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The promise is "at once", against a server given ten minutes; the
	// bound is generous for a loaded machine.
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Connect took %s, want it to return before the servers answer", took)
	}
	connecting := func() []string {
		var names []string
		for _, u := range up.Unavailable() {
			if u.Connecting && u.Err == nil && strings.Contains(u.Reason, "still connecting") {
				names = append(names, u.Namespace)
			}
		}
		return names
	}
	if got := connecting(); !slices.Contains(got, "hang") {
		t.Errorf("got %q connecting, want hang among them", got)
	}
	for deadline := time.After(time.Minute); slices.Contains(connecting(), "good"); {
		select {
		case <-up.Changed():
		case <-deadline:
			t.Fatal("the good server did not arrive")
		}
	}
	if got := connecting(); !slices.Equal(got, []string{"hang"}) {
		t.Errorf("got %q connecting, want only hang", got)
	}
	res, _ := run(t, up.Tools(), codemode.Options{}, `return await tools.good.echo({ hi: 1 })`)
	mustOK(t, res)
	closed := make(chan struct{})
	go func() { _ = up.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not stop the server still connecting")
	}
}
