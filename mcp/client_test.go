package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
)

func connect(t *testing.T, cfg *Config, opts ClientOptions) *Upstreams {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := Connect(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	return up
}

func kit(t *testing.T, opts ClientOptions) *Upstreams {
	t.Helper()
	return connect(t, &Config{Servers: map[string]UpstreamConfig{"kit": kitConfig(t, nil)}}, opts)
}

// run executes code against tools and decodes the result's JSON.
func run(t *testing.T, tools codemode.Tools, opts codemode.Options, code string) (codemode.Result, map[string]any) {
	t.Helper()
	opts.Tools = tools
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := codemode.Execute(ctx, opts, code)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	b, _ := json.Marshal(res)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return res, m
}

func mustOK(t *testing.T, res codemode.Result) {
	t.Helper()
	if !res.OK {
		b, _ := json.Marshal(res)
		t.Fatalf("run failed: %s", b)
	}
}

func TestKitResultShapes(t *testing.T) {
	up := kit(t, ClientOptions{MaxInlineBytes: 1000})
	ns := up.Tools()["kit"].(codemode.Tools)
	// The kit lists 21 tools three to a page: all of them arrived.
	for _, name := range []string{"echo", "weird/name.x", "then_", "bad_schema", "add_tool", "structured"} {
		if _, ok := ns[name]; !ok {
			t.Errorf("tool %q missing from %v", name, keys(ns))
		}
	}
	if _, ok := ns["then"]; ok {
		t.Error(`"then" should be exposed as "then_"`)
	}
	res, m := run(t, up.Tools(), codemode.Options{}, `
		const k = tools.kit
		const [echo, text, num, multi, empty, structured, media, weird, then] = await Promise.all([
			k.echo({ message: "hi", n: 1 }), k.text({}), k.number_text({}), k.multi({}), k.empty({}),
			k.structured({}), k.media({}), k["weird/name.x"]({}), k.then_({}),
		])
		return { echo, text, num, multi, empty, structured, media, weird, then }`)
	mustOK(t, res)
	v := m["value"].(map[string]any)
	check := func(name string, want string) {
		t.Helper()
		got, _ := json.Marshal(v[name])
		if string(got) != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	check("echo", `{"message":"hi","n":1}`)
	check("text", `"plain \u003ctext\u003e \u0026 more"`)
	check("num", `"12345678901234567890"`)
	check("multi", `["first",{"second":2}]`)
	check("empty", `null`)
	check("structured", `{"items":["a","b","c"],"total":3}`)
	check("weird", `"weird ok"`)
	check("then", `"then ok"`)
	media := v["media"].([]any)
	if len(media) != 5 {
		t.Fatalf("media has %d items", len(media))
	}
	img, audio, res1, res2, link := media[0].(map[string]any), media[1].(map[string]any), media[2].(map[string]any), media[3].(map[string]any), media[4].(map[string]any)
	if img["type"] != "image" || img["mimeType"] != "image/png" || img["size"] != 3.0 || img["data"] != "AQID" {
		t.Errorf("image = %v", img)
	}
	if _, has := audio["data"]; has || audio["size"] != 100000.0 || audio["type"] != "audio" {
		t.Errorf("audio over the inline cap = %v", audio)
	}
	if res1["type"] != "resource" || res1["text"] != "hello" || res1["uri"] != "file:///a.txt" {
		t.Errorf("text resource = %v", res1)
	}
	if res2["blob"] != "CQk=" || res2["size"] != 2.0 {
		t.Errorf("blob resource = %v", res2)
	}
	if link["type"] != "resource_link" || link["uri"] != "file:///c" || link["size"] != 42.0 {
		t.Errorf("link = %v", link)
	}
}

func keys(m codemode.Tools) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestKitErrors(t *testing.T) {
	up := kit(t, ClientOptions{})
	res, m := run(t, up.Tools(), codemode.Options{}, `
		const out = {}
		for (const name of ["fail", "rpc_error"]) {
			try { await tools.kit[name]({}) } catch (e) { out[name] = { kind: e.kind, tool: e.tool, message: e.message } }
		}
		try { await tools.kit.echo("not an object") } catch (e) { out.notObject = e.message }
		return out`)
	mustOK(t, res)
	v := m["value"].(map[string]any)
	fail := v["fail"].(map[string]any)
	msg := fail["message"].(string)
	if fail["kind"] != "ToolFailure" || fail["tool"] != "kit.fail" {
		t.Errorf("fail = %v", fail)
	}
	if !strings.HasPrefix(msg, "no such order o-9\n") || strings.ContainsAny(msg, "\x1b\x07\r") || len([]rune(msg)) != maxErrorRunes+1 || !strings.HasSuffix(msg, "…") {
		t.Errorf("fail message not cleaned and bounded: %q…", msg[:40])
	}
	if rpc := v["rpc_error"].(map[string]any); rpc["message"] != "bad widget id" {
		t.Errorf("rpc_error = %v", rpc)
	}
	if !strings.Contains(v["notObject"].(string), "must be an object") {
		t.Errorf("notObject = %v", v["notObject"])
	}
}

func TestMalformedSchemaKeepsTool(t *testing.T) {
	logger, logs := newLogRecorder()
	up := kit(t, ClientOptions{Logger: logger})
	ns := up.Tools()["kit"].(codemode.Tools)
	for _, name := range []string{"bad_schema", "bad_properties"} {
		tool := ns[name].(codemode.Tool)
		if tool.Input != nil || !tool.SkipInputValidation {
			t.Errorf("%s: input schema %v kept", name, tool.Input)
		}
	}
	if !strings.Contains(logs(), "dropping the input schema tool=bad_schema") {
		t.Errorf("the dropped schema is not logged:\n%s", logs())
	}
	rt, err := codemode.New(codemode.Options{Tools: up.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if !strings.Contains(rt.Instructions(), "bad_schema") && rt.Search(codemode.SearchRequest{Query: "bad_schema", Limit: 5}).Items == nil {
		t.Error("bad_schema is not in the catalog")
	}
	res, m := run(t, up.Tools(), codemode.Options{}, `return [await tools.kit.bad_schema({ x: 1 }), await tools.kit.bad_properties({})]`)
	mustOK(t, res)
	if got, _ := json.Marshal(m["value"]); string(got) != `["bad schema ok","bad properties ok"]` {
		t.Errorf("value = %s", got)
	}
}

func TestListChanged(t *testing.T) {
	up := kit(t, ClientOptions{})
	res, m := run(t, up.Tools(), codemode.Options{}, `return await tools.kit.add_tool({})`)
	mustOK(t, res)
	if m["value"] != "added_1" {
		t.Fatalf("value = %v", m["value"])
	}
	select {
	case <-up.Changed():
	case <-time.After(10 * time.Second):
		t.Fatal("no change signalled after list_changed")
	}
	ns := up.Tools()["kit"].(codemode.Tools)
	if _, ok := ns["added_1"]; !ok {
		t.Fatalf("added_1 missing after refresh: %v", keys(ns))
	}
	res, m = run(t, up.Tools(), codemode.Options{}, `return await tools.kit.added_1({})`)
	mustOK(t, res)
	if m["value"] != "added_1 ok" {
		t.Errorf("value = %v", m["value"])
	}
}

// TestKilledMidCall kills the server while a call waits on it: the call
// fails with a ToolFailure the program can read, and the next run's call
// starts a new server.
func TestKilledMidCall(t *testing.T) {
	up := kit(t, ClientOptions{})
	pidFile := filepath.Join(t.TempDir(), "pid")
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
				pid, _ := strconv.Atoi(string(b))
				_ = syscall.Kill(pid, syscall.SIGKILL)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	res, m := run(t, up.Tools(), codemode.Options{Timeout: 30 * time.Second}, `
		try { await tools.kit.hang({ pidFile: `+strconv.Quote(pidFile)+` }) } catch (e) { return { kind: e.kind, message: e.message } }`)
	<-done
	mustOK(t, res)
	v := m["value"].(map[string]any)
	if v["kind"] != "ToolFailure" || !strings.Contains(v["message"].(string), `"kit" disconnected during the call`) {
		t.Errorf("value = %v", v)
	}
	res, m = run(t, up.Tools(), codemode.Options{}, `return await tools.kit.echo({ again: true })`)
	mustOK(t, res)
	if got, _ := json.Marshal(m["value"]); string(got) != `{"again":true}` {
		t.Errorf("after reconnect: %s", got)
	}
}

func TestCrashMidCallThenReconnect(t *testing.T) {
	up := kit(t, ClientOptions{})
	res, m := run(t, up.Tools(), codemode.Options{}, `
		let crash
		try { await tools.kit.crash({}) } catch (e) { crash = e.kind }
		const after = await tools.kit.echo({ n: 2 })
		return { crash, after }`)
	mustOK(t, res)
	if got, _ := json.Marshal(m["value"]); string(got) != `{"after":{"n":2},"crash":"ToolFailure"}` {
		t.Errorf("value = %s", got)
	}
}

// TestHangPastDeadline: the run times out, its call's context is
// cancelled, the server receives notifications/cancelled, and the server
// keeps serving.
func TestHangPastDeadline(t *testing.T) {
	up := kit(t, ClientOptions{})
	start := time.Now()
	res, _ := run(t, up.Tools(), codemode.Options{Timeout: 300 * time.Millisecond}, `await tools.kit.hang({})`)
	if res.OK || res.Error.Kind != codemode.TimeoutExceeded {
		t.Fatalf("result = %+v", res.Error)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the run took %v", took)
	}
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		res, m := run(t, up.Tools(), codemode.Options{}, `return await tools.kit.cancelled({})`)
		mustOK(t, res)
		if got = m["value"].(string); got == "1" {
			return
		}
	}
	t.Errorf("the server saw %s cancellations, want 1", got)
}

func TestCallTimeout(t *testing.T) {
	up := kit(t, ClientOptions{CallTimeout: 200 * time.Millisecond})
	res, m := run(t, up.Tools(), codemode.Options{Timeout: 20 * time.Second}, `
		let message
		try { await tools.kit.hang({}) } catch (e) { message = e.message }
		return { message, next: await tools.kit.text({}) }`)
	mustOK(t, res)
	v := m["value"].(map[string]any)
	if v["message"] != `the MCP server "kit" did not answer within 200ms` || v["next"] != "plain <text> & more" {
		t.Errorf("value = %v", v)
	}
}

func TestMinimalEnvironment(t *testing.T) {
	t.Setenv("CODEMODE_TEST_SECRET", "hunter2")
	cfg := &Config{Servers: map[string]UpstreamConfig{"kit": kitConfig(t, map[string]string{"GIVEN": "yes"})}}
	up := connect(t, cfg, ClientOptions{})
	res, m := run(t, up.Tools(), codemode.Options{}, `return await tools.kit.env({})`)
	mustOK(t, res)
	env := m["value"].(map[string]any)
	if env["GIVEN"] != "yes" || env["PATH"] == nil {
		t.Errorf("configured or inherited variables missing: %v", env)
	}
	if _, leaked := env["CODEMODE_TEST_SECRET"]; leaked {
		t.Error("a host variable not in the config reached the server")
	}
}

func TestHTTPHeadersAndSSEFallback(t *testing.T) {
	auth := func(r *http.Request) error {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			return errors.New("no token")
		}
		return nil
	}
	cfg := &Config{Servers: map[string]UpstreamConfig{
		"streamable": {URL: httpKit(t, false, auth) + "/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}},
		"legacy":     {URL: httpKit(t, true, nil)},
	}}
	logger, logs := newLogRecorder()
	up := connect(t, cfg, ClientOptions{Logger: logger})
	res, m := run(t, up.Tools(), codemode.Options{}, `
		return await Promise.all([tools.streamable.echo({ via: "http" }), tools.legacy.echo({ via: "sse" })])`)
	if !res.OK {
		t.Log(logs())
	}
	mustOK(t, res)
	if got, _ := json.Marshal(m["value"]); string(got) != `[{"via":"http"},{"via":"sse"}]` {
		t.Errorf("value = %s", got)
	}
	if !strings.Contains(logs(), "connected transport=sse protocol=2025-11-25 tools=19") {
		t.Errorf("no fallback logged:\n%s", logs())
	}

	// Without the header the server refuses, and Connect says which one.
	cfg = &Config{Servers: map[string]UpstreamConfig{"streamable": {Type: "http", URL: httpKit(t, false, auth)}}}
	if _, err := Connect(context.Background(), cfg, ClientOptions{ConnectTimeout: 5 * time.Second}); err == nil || !strings.Contains(err.Error(), `server "streamable"`) {
		t.Errorf("Connect without the header: %v", err)
	}
}

func TestConnectFailures(t *testing.T) {
	exit := kitConfig(t, nil)
	exit.Env[fakeServerEnv] = "exit"
	cfg := &Config{Servers: map[string]UpstreamConfig{
		"good":    kitConfig(t, nil),
		"missing": {Command: "/nonexistent/codemode-test-server"},
		"dies":    exit,
	}}
	start := time.Now()
	_, err := Connect(context.Background(), cfg, ClientOptions{ConnectTimeout: 10 * time.Second})
	if err == nil {
		t.Fatal("Connect succeeded")
	}
	for _, want := range []string{`server "missing"`, `server "dies"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), `server "good"`) {
		t.Errorf("error blames the good server: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Connect took %v", took)
	}
}

func TestClosedUpstreams(t *testing.T) {
	up := kit(t, ClientOptions{})
	tools := up.Tools()
	if err := up.Close(); err != nil {
		t.Fatal(err)
	}
	if _, open := <-up.Changed(); open {
		t.Error("Changed is not closed")
	}
	res, _ := run(t, tools, codemode.Options{}, `return await tools.kit.echo({})`)
	if res.OK || res.Error.Kind != codemode.ToolFailure || res.Error.Message != "Tool execution failed" {
		t.Errorf("call after Close: %+v", res.Error)
	}
}

// TestNoGoroutineLeak: Close waits for everything the Upstreams started.
func TestNoGoroutineLeak(t *testing.T) {
	url := httpKit(t, false, nil)
	cycle := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		up, err := Connect(ctx, &Config{Servers: map[string]UpstreamConfig{
			"kit":  kitConfig(t, nil),
			"http": {URL: url},
		}}, ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, _ := run(t, up.Tools(), codemode.Options{}, `
			try { await tools.kit.crash({}) } catch {}
			return await Promise.all([tools.kit.add_tool({}), tools.http.echo({}), tools.kit.echo({})])`)
		mustOK(t, res)
		_ = up.Close()
	}
	cycle() // warm up: the engine keeps its own pool goroutines
	base := runtime.NumGoroutine()
	for range 3 {
		cycle()
	}
	var n int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		// The HTTP test server stays up and may keep an idle connection.
		if n = runtime.NumGoroutine(); n <= base+2 {
			return
		}
	}
	buf := make([]byte, 1<<20)
	t.Errorf("%d goroutines after Close, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
}

// TestReconnectBackoff: a server that crashed and cannot restart makes
// calls fail fast with a clear message until its backoff passes; Refresh
// tries at once.
func TestReconnectBackoff(t *testing.T) {
	sc := kitConfig(t, map[string]string{fakeServerEnv: "once", fakeServerEnv + "_MARKER": filepath.Join(t.TempDir(), "started")})
	up := connect(t, &Config{Servers: map[string]UpstreamConfig{"kit": sc}}, ClientOptions{})
	res, m := run(t, up.Tools(), codemode.Options{}, `
		const out = []
		for (const tool of ["crash", "echo", "echo"]) {
			try { await tools.kit[tool]({}) } catch (e) { out.push(e.message) }
		}
		return out`)
	mustOK(t, res)
	msgs := m["value"].([]any)
	if len(msgs) != 3 || !strings.Contains(msgs[0].(string), "disconnected during the call") {
		t.Fatalf("messages = %v", msgs)
	}
	for _, msg := range msgs[1:] {
		if !strings.Contains(msg.(string), `the MCP server "kit" is unavailable: it failed to start or connect; the next attempt is in`) {
			t.Errorf("message = %q", msg)
		}
	}
	if err := up.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), `server "kit"`) {
		t.Errorf("Refresh = %v", err)
	}
}
