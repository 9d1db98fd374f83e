package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// echoSecrets are the forms of a secret the echo servers below send
// back, and so the forms the program must not see.
func echoSecrets(s string) []string {
	b, _ := json.Marshal(s)
	js := string(b[1 : len(b)-1])
	var u, pct strings.Builder
	for _, r := range s {
		fmt.Fprintf(&u, "\\u%04x", r)
	}
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&pct, "%%%02x", s[i])
	}
	return []string{
		s, strings.ReplaceAll(js, "/", `\/`), u.String(), url.QueryEscape(s), url.PathEscape(s),
		pct.String(), html.EscapeString(s), strings.ReplaceAll(html.EscapeString(s), "/", "&#x2F;"),
		base64.StdEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s)),
	}
}

// echoText writes every form of the secrets, in one text.
func echoText(secrets ...string) string {
	var b strings.Builder
	for _, s := range secrets {
		for i, f := range echoSecrets(s) {
			fmt.Fprintf(&b, "form %d: %s\n", i, f)
		}
	}
	return b.String()
}

const (
	echoToken = "mcp-tok/abc+def=ghi-0123456789"
	echoKey   = "key_live_Zx9/Yw8+Vu7="
)

// TestUpstreamErrorsRedacted: an HTTP server that echoes the configured
// headers, in any encoding, in a tool error, a JSON-RPC error or a
// result, shows the program none of them.
func TestUpstreamErrorsRedacted(t *testing.T) {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "echo", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	headers := func(req *mcpsdk.CallToolRequest) []string {
		return []string{req.Extra.Header.Get("Authorization"), req.Extra.Header.Get("X-Api-Key")}
	}
	srv.AddTool(&mcpsdk.Tool{Name: "tool_error", InputSchema: obj}, func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "denied:\n" + echoText(headers(req)...)}}}, nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "rpc_error", InputSchema: obj}, func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad credentials " + echoText(headers(req)...)}
	})
	srv.AddTool(&mcpsdk.Tool{Name: "json_text", InputSchema: obj}, func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		b, _ := json.Marshal(map[string]string{"auth": headers(req)[0], "key": headers(req)[1]})
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: strings.ReplaceAll(string(b), "/", `\/`)}}}, nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "structured", InputSchema: obj}, func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		return &mcpsdk.CallToolResult{StructuredContent: map[string]any{"echo": echoText(headers(req)...), headers(req)[1]: true}}, nil
	})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	logger, logs := newLogRecorder()
	up := connect(t, &Config{Servers: map[string]UpstreamConfig{"echo": {URL: ts.URL,
		Headers: map[string]string{"Authorization": "Bearer " + echoToken, "X-Api-Key": echoKey}}}}, ClientOptions{Logger: logger})
	var forbidden []string
	for _, s := range []string{echoToken, "Bearer " + echoToken, echoKey} {
		forbidden = append(forbidden, echoSecrets(s)...)
	}
	for _, tool := range []string{"tool_error", "rpc_error", "json_text", "structured"} {
		t.Run(tool, func(t *testing.T) {
			res, _ := run(t, up.Tools(), codemode.Options{}, `return await tools.echo.`+tool+`({})`)
			whole, _ := json.Marshal(res)
			for _, f := range forbidden {
				if strings.Contains(string(whole), f) {
					t.Fatalf("the result holds %q:\n%s", f, whole)
				}
			}
			if !strings.Contains(string(whole), "[REDACTED]") {
				t.Fatalf("got %s, want the echoed headers redacted", whole)
			}
		})
	}
	for _, f := range forbidden {
		if strings.Contains(logs(), f) {
			t.Fatalf("the log holds %q:\n%s", f, logs())
		}
	}
}

// addLeak gives the kit a tool that leaks an environment variable to
// stderr, the log and a tool error.
func addLeak(srv *mcpsdk.Server) {
	srv.AddTool(&mcpsdk.Tool{Name: "leak", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			s := os.Getenv("KIT_API_TOKEN")
			fmt.Fprintf(os.Stderr, "starting with token %s\n%s", s, echoText(s))
			// Lines longer than a log record, the secret across the cut:
			// one written whole (cut to one record), one written in two
			// parts, read apart (logged in two records).
			long := strings.Repeat("x", maxLogLine-5) + s + strings.Repeat("y", 100)
			fmt.Fprintf(os.Stderr, "%s\n", long)
			fmt.Fprint(os.Stderr, long)
			time.Sleep(100 * time.Millisecond)
			fmt.Fprint(os.Stderr, "\nleak done\n")
			// A message longer than a tool error, the secret across the cut.
			text := strings.Repeat("z", maxErrorRunes-5) + s + " " + echoText(s)
			return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: text}}}, nil
		})
}

// TestStdioEnvSecretRedacted: a stdio server's credential variables do
// not come back to the program or into the log, whole or halved by a cut;
// its other variables do.
func TestStdioEnvSecretRedacted(t *testing.T) {
	const secret = "kit-secret/xyz+123=abc"
	sc := kitConfig(t, map[string]string{fakeServerEnv: "leak", "KIT_API_TOKEN": secret, "PLAIN_SETTING": "plain-value"})
	logger, logs := newLogRecorder()
	up := connect(t, &Config{Servers: map[string]UpstreamConfig{"kit": sc}}, ClientOptions{Logger: logger})
	res, m := run(t, up.Tools(), codemode.Options{}, `
		let leak
		try { await tools.kit.leak({}) } catch (e) { leak = e.message }
		return { leak, env: await tools.kit.env({}) }`)
	mustOK(t, res)
	whole, _ := json.Marshal(res)
	for _, f := range append(echoSecrets(secret), secret[:5]) {
		if strings.Contains(string(whole), f) {
			t.Fatalf("the result holds %q:\n%s", f, whole)
		}
	}
	v := m["value"].(map[string]any)
	if env := v["env"].(map[string]any); env["KIT_API_TOKEN"] != "[REDACTED]" || env["PLAIN_SETTING"] != "plain-value" {
		t.Errorf("got KIT_API_TOKEN=%v PLAIN_SETTING=%v, want [REDACTED] and plain-value", env["KIT_API_TOKEN"], env["PLAIN_SETTING"])
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs(), "leak done") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs(), "leak done") {
		t.Fatalf("the stderr lines did not reach the log:\n%s", logs())
	}
	// Whole or in two pieces: no piece of 8 characters of it.
	for i := 0; i+8 <= len(secret); i++ {
		if strings.Contains(logs(), secret[i:i+8]) {
			t.Fatalf("the log holds %q of the secret:\n%s", secret[i:i+8], logs())
		}
	}
	for _, f := range echoSecrets(secret) {
		if strings.Contains(logs(), f) {
			t.Fatalf("the log holds %q:\n%s", f, logs())
		}
	}
}

// TestConnectErrorRedacted: a key in the URL does not reach the error
// Connect returns, nor the log.
func TestConnectErrorRedacted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	const key, pass = "url-key-5/6+7=", "url-pass-8"
	logger, logs := newLogRecorder()
	cfg := &Config{Servers: map[string]UpstreamConfig{"down": {URL: "http://user:" + pass + "@" + addr + "/mcp?api_key=" + url.QueryEscape(key) + "&region=eu"}}}
	_, err = Connect(context.Background(), cfg, ClientOptions{Logger: logger, ConnectTimeout: 5 * time.Second})
	if err == nil {
		t.Fatal("got a connection, want a refused one")
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("got %T, want the network error still reachable with errors.As", err)
	}
	for _, text := range []string{err.Error(), logs()} {
		for _, f := range append(echoSecrets(key), pass) {
			if strings.Contains(text, f) {
				t.Fatalf("got %q, which holds %q", text, f)
			}
		}
	}
	if !strings.Contains(err.Error(), "region=eu") && !strings.Contains(err.Error(), addr) {
		t.Errorf("got %q, want the rest of the URL kept", err)
	}
}

// urlLeaker is a stdio server that dies at start after printing to
// stderr each argument and environment variable it got, and the user
// information of each URL in them, raw and percent-decoded, whole and
// split at the colon: what a server that logs its connection string
// before failing to connect prints.
const urlLeaker = `
const dec = s => { try { return decodeURIComponent(s) } catch { return s } }
const seen = process.argv.slice(1).concat(Object.entries(process.env).map(([k, v]) => k + '=' + v))
for (const a of seen) {
	console.error('saw ' + a)
	for (const m of a.matchAll(/:\/\/([^\/?#\s]*)@/g)) {
		console.error('userinfo ' + m[1] + ' decoded ' + dec(m[1]) + ' parts ' + m[1].split(':').map(dec).join(' | '))
	}
}
process.exit(2)`

// TestStartFailureURLSecretsRedacted: a server given a URL with a
// password in its arguments, its environment or an inherited variable,
// or given any inherited variable, prints them before it dies; none of
// them reaches the error, the reason or the log, while the rest of each
// URL (the user name beside a password, the host) does.
func TestStartFailureURLSecretsRedacted(t *testing.T) {
	nodeBin := node(t)
	t.Setenv("CODEMODE_TEST_INHERITED_PLAIN", "inherited-plain-value-77")
	t.Setenv("CODEMODE_TEST_INHERITED_DSN", "mysql://root:inh-pass-5566@db.internal/app")
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		inherit []string
		secret  []string // must not appear
		kept    []string // must appear: what is not a secret
	}{
		{name: "password in an argument",
			args:   []string{"postgresql://pguser:pg-pass-1234@db.internal/x"},
			secret: []string{"pg-pass-1234"}, kept: []string{"postgresql://pguser:[REDACTED]@db.internal/x"}},
		{name: "percent-encoded password inside a flag",
			args:   []string{"--db=postgres://u:p%40ss-word-5678@h.internal/d?sslmode=require"},
			secret: []string{"p%40ss-word-5678", "p@ss-word-5678"}, kept: []string{"@h.internal/d?sslmode=require"}},
		{name: "token as the user name",
			args:   []string{"https://ghp_tokenAsUser1234@github.com/org/repo.git"},
			secret: []string{"ghp_tokenAsUser1234"}, kept: []string{"@github.com/org/repo.git"}},
		{name: "key as the user name with an empty password",
			args:   []string{"https://sk_live_keyAsUser9876:@api.example.com/v1"},
			secret: []string{"sk_live_keyAsUser9876"}, kept: []string{"@api.example.com/v1"}},
		{name: "two URLs in one argument",
			args:   []string{"--from=redis://:redis-pass-1111@a.internal --to=amqp://guest:amqp-pass-2222@b.internal"},
			secret: []string{"redis-pass-1111", "amqp-pass-2222"}, kept: []string{"amqp://guest:[REDACTED]@b.internal"}},
		{name: "password in an environment value whose name says nothing",
			env:    map[string]string{"DATABASE_URL": "postgres://envuser:env-pass-4321@h.internal/d"},
			secret: []string{"env-pass-4321"}, kept: []string{"DATABASE_URL=postgres://envuser:[REDACTED]@h.internal/d"}},
		{name: "inherited variable whose name says nothing",
			inherit: []string{"CODEMODE_TEST_INHERITED_PLAIN"},
			secret:  []string{"inherited-plain-value-77"}, kept: []string{"CODEMODE_TEST_INHERITED_PLAIN=[REDACTED]"}},
		{name: "inherited URL, its password printed alone",
			inherit: []string{"CODEMODE_TEST_INHERITED_DSN"},
			secret:  []string{"inh-pass-5566", "mysql://root:inh-pass-5566@db.internal/app"}, kept: []string{"CODEMODE_TEST_INHERITED_DSN=[REDACTED]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-e", urlLeaker, "--"}, tc.args...)
			cfg := &Config{Servers: map[string]UpstreamConfig{"leaky": {Command: nodeBin, Args: args, Env: tc.env, EnvInherit: tc.inherit}}}
			logger, logs := newLogRecorder()
			up := connect(t, cfg, ClientOptions{Lenient: true, Logger: logger})
			un := up.Unavailable()
			if len(un) != 1 {
				t.Fatalf("got unavailable %v, want leaky", un)
			}
			texts := map[string]string{"error": un[0].Err.Error(), "reason": un[0].Reason, "log": logs()}
			if !strings.Contains(texts["log"], "saw ") {
				t.Fatalf("the server's stderr did not reach the log:\n%s", texts["log"])
			}
			for what, text := range texts {
				for _, s := range tc.secret {
					if f := firstIn(text, echoSecrets(s)); f != "" {
						t.Errorf("the %s holds %q:\n%s", what, f, text)
					}
				}
			}
			for _, k := range tc.kept {
				if !strings.Contains(texts["log"], k) {
					t.Errorf("the log lacks %q, which is no secret:\n%s", k, texts["log"])
				}
			}
		})
	}
}

// firstIn returns the first of forms that text holds, or "".
func firstIn(text string, forms []string) string {
	for _, f := range forms {
		if strings.Contains(text, f) {
			return f
		}
	}
	return ""
}

// TestConfigURLSecrets: the password of a URL anywhere in an entry, and
// every inherited value, are among its secrets; a user name beside a
// password is not, except in the url, whose pair an HTTP client sends.
func TestConfigURLSecrets(t *testing.T) {
	t.Setenv("CODEMODE_TEST_INHERITED_ANY", "any-inherited-8888")
	for _, tc := range []struct {
		name   string
		sc     UpstreamConfig
		secret []string
		kept   []string
	}{
		{"command", UpstreamConfig{Command: "/opt/bin/run https://cmduser:cmd-pass-1111@h.internal"}, []string{"cmd-pass-1111"}, []string{"cmduser"}},
		{"cwd", UpstreamConfig{Command: "x", Cwd: "/mnt/sftp://cwduser:cwd-pass-2222@h.internal/x"}, []string{"cwd-pass-2222"}, []string{"cwduser"}},
		{"env", UpstreamConfig{Command: "x", Env: map[string]string{"DSN": "mysql://envuser:env-pass-3333@h"}}, []string{"env-pass-3333"}, []string{"envuser"}},
		{"inherited", UpstreamConfig{Command: "x", EnvInherit: []string{"CODEMODE_TEST_INHERITED_ANY"}}, []string{"any-inherited-8888"}, nil},
		{"header", UpstreamConfig{URL: "https://h.internal/mcp", Headers: map[string]string{"X-Upstream": "postgres://hdruser:hdr-pass-4444@db"}},
			[]string{"hdr-pass-4444", "postgres://hdruser:hdr-pass-4444@db"}, nil},
		{"url", UpstreamConfig{URL: "https://urluser:url-pass-5555@h.internal/mcp"}, []string{"urluser", "url-pass-5555", "urluser:url-pass-5555"}, nil},
		{"url with a token as user", UpstreamConfig{URL: "https://url-token-6666@h.internal/mcp"}, []string{"url-token-6666"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.sc.secrets()
			for _, s := range tc.secret {
				if !slices.Contains(got, s) {
					t.Errorf("got secrets %q, want %q among them", got, s)
				}
			}
			for _, s := range tc.kept {
				if slices.Contains(got, s) {
					t.Errorf("got secrets %q, want %q not among them", got, s)
				}
			}
		})
	}
}

// TestConfigErrorURLRedacted: a url ParseConfig refuses is named in the
// error without its credentials.
func TestConfigErrorURLRedacted(t *testing.T) {
	_, err := ParseConfig([]byte(`{"mcpServers": {"ftp": {"url": "ftp://ftpuser:ftp-pass-7777@files.internal/x"}}}`))
	if err == nil || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("got %v, want ErrInvalidConfig", err)
	}
	if strings.Contains(err.Error(), "ftp-pass-7777") || !strings.Contains(err.Error(), "@files.internal/x") {
		t.Errorf("got %q, want the url without its password", err)
	}
}
