package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/oauthtest"
)

// browse is a "browser" that approves at once: it follows the
// authorization URL's redirects, to the login's loopback listener.
func browse(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("browser: %s: %s", resp.Status, body)
	}
	return nil
}

func login(t *testing.T, cfg *Config, name, dir string) *LoginResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Login(ctx, cfg, name, LoginOptions{Open: browse, TokenDir: dir, Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	return res
}

func readRecord(t *testing.T, path string) tokenRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec tokenRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func secureConfig(srv *oauthtest.Server) *Config {
	return &Config{Servers: map[string]UpstreamConfig{"secure": {URL: srv.MCPURL}}}
}

// callText runs a call of tools.secure.<tool> and returns the result's
// JSON.
func callText(t *testing.T, up *Upstreams, tool string) (codemode.Result, string) {
	t.Helper()
	res, _ := run(t, up.Tools(), codemode.Options{}, `return await tools.secure.`+tool+`({})`)
	b, _ := json.Marshal(res)
	return res, string(b)
}

// TestOAuthLoginThenConnect: a login registers a client, authorizes with
// PKCE and stores the token privately; Connect uses it, and a server
// that echoes it shows the program only [REDACTED].
func TestOAuthLoginThenConnect(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	dir := filepath.Join(t.TempDir(), "tokens")
	cfg := secureConfig(srv)
	res := login(t, cfg, "secure", dir)
	if !res.Authorized || res.Tools != 3 || !res.Refreshable || !slices.Contains(res.Scopes, oauthtest.ScopeRead) {
		t.Fatalf("login result %+v", res)
	}
	if c := srv.Counts(); c.Registrations != 1 || c.CodeExchanges != 1 {
		t.Errorf("counts %+v", c)
	}
	if runtime.GOOS != "windows" {
		for path, want := range map[string]os.FileMode{dir: 0o700, res.TokenFile: 0o600} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != want {
				t.Errorf("%s has mode %04o, want %04o", path, fi.Mode().Perm(), want)
			}
		}
	}
	rec := readRecord(t, res.TokenFile)
	if rec.URL != srv.MCPURL || rec.Token.RefreshToken == "" || rec.ClientID == "" {
		t.Fatalf("record %+v", rec)
	}

	logger, logs := newLogRecorder()
	up := connect(t, cfg, ClientOptions{Logger: logger, TokenDir: dir})
	r, whole := callText(t, up, "whoami")
	mustOK(t, r)
	if !strings.Contains(whole, "hello user-1") {
		t.Errorf("whoami: %s", whole)
	}
	r, whole = callText(t, up, "echo_auth")
	mustOK(t, r)
	if strings.Contains(whole, rec.Token.AccessToken) || !strings.Contains(whole, "you sent Bearer [REDACTED]") {
		t.Errorf("echo_auth shows the token: %s", whole)
	}
	for _, s := range []string{rec.Token.AccessToken, rec.Token.RefreshToken} {
		if strings.Contains(logs(), s) {
			t.Errorf("the log holds a token:\n%s", logs())
		}
	}
}

// TestOAuthNoToken: without a login the server is unavailable, the reason
// names the login command, nothing falls back to HTTP+SSE, and a login
// made while the Upstreams run is used by the next call without a
// restart.
func TestOAuthNoToken(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	dir := t.TempDir()
	cfg := secureConfig(srv)
	logger, logs := newLogRecorder()
	up := connect(t, cfg, ClientOptions{Logger: logger, TokenDir: dir, Lenient: true,
		LoginCommand: func(s string) string { return "codemode login " + s + " --config my.json" }})
	un := up.Unavailable()
	if len(un) != 1 || !strings.Contains(un[0].Reason, `run "codemode login secure --config my.json"`) || !strings.Contains(un[0].Reason, "no token is stored") {
		t.Fatalf("unavailable %+v", un)
	}
	if l := logs(); !strings.Contains(l, "ERROR the server needs an OAuth authorization") || strings.Contains(l, "SSE") {
		t.Errorf("log:\n%s", l)
	}
	if c := srv.Counts(); c.Registrations != 0 || c.Authorizations != 0 {
		t.Errorf("codemode mcp started an authorization: %+v", c)
	}

	login(t, cfg, "secure", dir)
	// The login is seen within a second or so, in the background: no
	// waiting out the backoff, no call needed.
	for deadline := time.Now().Add(10 * time.Second); len(up.Unavailable()) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still unavailable after the login: %+v", up.Unavailable())
		}
	}
	r, whole := callText(t, up, "whoami")
	mustOK(t, r)
	if !strings.Contains(whole, "hello") {
		t.Errorf("whoami: %s", whole)
	}
}

// TestOAuthRefresh: an expired token is refreshed and the new one stored;
// a token the server stopped accepting is refreshed on its 401 and the
// request retried; when the refresh token is refused too, the call says
// to log in again.
func TestOAuthRefresh(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{TokenTTL: 2 * time.Second})
	dir := t.TempDir()
	cfg := secureConfig(srv)
	res := login(t, cfg, "secure", dir)
	first := readRecord(t, res.TokenFile)
	// The server refuses a refresh that does not name the token's
	// resource, so each refresh below also shows the record kept it.
	if first.Resource != srv.Resource {
		t.Fatalf("stored resource %q, want %q", first.Resource, srv.Resource)
	}

	up := connect(t, cfg, ClientOptions{TokenDir: dir})
	r, whole := callText(t, up, "whoami")
	mustOK(t, r)
	// oauth2 refreshes ten seconds before the expiry: at once, here.
	after := readRecord(t, res.TokenFile)
	if srv.Counts().Refreshes == 0 || after.Token.AccessToken == first.Token.AccessToken || after.Token.RefreshToken == first.Token.RefreshToken {
		t.Fatalf("no refresh stored: counts %+v", srv.Counts())
	}
	if !strings.Contains(whole, "hello") {
		t.Errorf("whoami: %s", whole)
	}

	// Revoked before its expiry: the 401 triggers a refresh.
	srv2 := oauthtest.New(t, oauthtest.Options{})
	cfg2 := secureConfig(srv2)
	login(t, cfg2, "secure", dir)
	up2 := connect(t, cfg2, ClientOptions{TokenDir: dir})
	mustOK(t, func() codemode.Result { r, _ := callText(t, up2, "whoami"); return r }())
	srv2.RevokeAccessTokens()
	r, whole = callText(t, up2, "whoami")
	mustOK(t, r)
	if c := srv2.Counts(); c.Refreshes != 1 {
		t.Errorf("counts %+v", c)
	}
	_ = whole

	// Everything revoked: log in again.
	srv2.RevokeAll()
	r, whole = callText(t, up2, "whoami")
	if r.OK || !strings.Contains(whole, "codemode login secure") || !strings.Contains(whole, "could not be refreshed") {
		t.Errorf("revoked: %s", whole)
	}
}

// TestOAuthRefreshOldRecord: a token stored before the resource was kept
// is refreshed without one, as before, by a server that allows that.
func TestOAuthRefreshOldRecord(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{TokenTTL: 2 * time.Second, LenientRefresh: true})
	dir := t.TempDir()
	cfg := secureConfig(srv)
	res := login(t, cfg, "secure", dir)
	rec := readRecord(t, res.TokenFile)
	rec.Resource = ""
	if err := saveToken(res.TokenFile, &rec); err != nil {
		t.Fatal(err)
	}
	before := srv.Counts().Refreshes
	up := connect(t, cfg, ClientOptions{TokenDir: dir})
	r, whole := callText(t, up, "whoami")
	mustOK(t, r)
	if srv.Counts().Refreshes == before || !strings.Contains(whole, "hello") {
		t.Fatalf("counts %+v, whoami %s", srv.Counts(), whole)
	}
}

// TestOAuthStepUp: a call the server refuses with 403 insufficient_scope
// fails with the scope and the login command, and the next login asks for
// that scope too; the running session then uses the new token.
func TestOAuthStepUp(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{})
	dir := t.TempDir()
	cfg := secureConfig(srv)
	res := login(t, cfg, "secure", dir)
	if slices.Contains(res.Scopes, oauthtest.ScopeAdmin) {
		t.Fatalf("scopes %v: the challenge asked for %s only", res.Scopes, oauthtest.ScopeRead)
	}
	up := connect(t, cfg, ClientOptions{TokenDir: dir})
	r, whole := callText(t, up, "admin")
	if r.OK || !strings.Contains(whole, oauthtest.ScopeAdmin) || !strings.Contains(whole, "codemode login secure") {
		t.Fatalf("admin without the scope: %s", whole)
	}
	if rec := readRecord(t, res.TokenFile); !slices.Contains(rec.Pending, oauthtest.ScopeAdmin) {
		t.Errorf("pending scopes %v", rec.Pending)
	}
	res = login(t, cfg, "secure", dir)
	if !slices.Contains(res.Scopes, oauthtest.ScopeAdmin) || !slices.Contains(res.Scopes, oauthtest.ScopeRead) {
		t.Fatalf("scopes after the step-up login: %v", res.Scopes)
	}
	if rec := readRecord(t, res.TokenFile); len(rec.Pending) != 0 {
		t.Errorf("pending scopes left: %v", rec.Pending)
	}
	r, whole = callText(t, up, "admin")
	mustOK(t, r)
	if !strings.Contains(whole, "admin done") {
		t.Errorf("admin: %s", whole)
	}
}

// TestOAuthPreregistered: a configured client (its secret from the
// environment, sent as client_secret_post) with a server that offers no
// registration, publishes its resource metadata only at the origin's
// root and its authorization server's as OpenID configuration. The secret
// is not stored with the token, and is redacted.
func TestOAuthPreregistered(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{ClientID: "pre-client", ClientSecret: "pre-secret-0123456789",
		AuthMethod: "client_secret_post", NoRegistration: true, RootMetadataOnly: true, OpenIDOnly: true, TokenTTL: 2 * time.Second})
	t.Setenv("CODEMODE_TEST_OAUTH_SECRET", "pre-secret-0123456789")
	cfg, err := ParseConfig(fmt.Appendf(nil, `{"mcpServers": {"secure": {"url": %q,
		"oauth": {"clientId": "pre-client", "clientSecret": "${CODEMODE_TEST_OAUTH_SECRET}", "scopes": ["mcp:admin"]}}}}`, srv.MCPURL))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	res := login(t, cfg, "secure", dir)
	if !slices.Contains(res.Scopes, oauthtest.ScopeAdmin) {
		t.Errorf("scopes %v: the configured scope is missing", res.Scopes)
	}
	b, _ := os.ReadFile(res.TokenFile)
	if strings.Contains(string(b), "pre-secret") {
		t.Errorf("the configured secret is stored:\n%s", b)
	}
	up := connect(t, cfg, ClientOptions{TokenDir: dir})
	r, whole := callText(t, up, "admin") // refreshes first, with the configured secret
	mustOK(t, r)
	if c := srv.Counts(); c.Registrations != 0 || c.Refreshes == 0 {
		t.Errorf("counts %+v", c)
	}
	_ = whole
	if got := up.ups["secure"].red().String("x pre-secret-0123456789 y"); strings.Contains(got, "pre-secret") {
		t.Errorf("the client secret is not redacted: %s", got)
	}
}

// TestOAuthTokenForAnotherURL: a token stored for one URL is not sent to
// another under the same server name.
func TestOAuthTokenForAnotherURL(t *testing.T) {
	a := oauthtest.New(t, oauthtest.Options{})
	b := oauthtest.New(t, oauthtest.Options{})
	dir := t.TempDir()
	res := login(t, secureConfig(a), "secure", dir)
	rec := readRecord(t, res.TokenFile)
	// Even copied to the other URL's file, it is refused as another URL's.
	other := tokenFile(dir, "secure", b.MCPURL)
	data, _ := os.ReadFile(res.TokenFile)
	if err := os.WriteFile(other, data, 0o600); err != nil {
		t.Fatal(err)
	}
	up := connect(t, secureConfig(b), ClientOptions{TokenDir: dir, Lenient: true})
	if un := up.Unavailable(); len(un) != 1 || !strings.Contains(un[0].Reason, "no token is stored") {
		t.Fatalf("unavailable %+v", un)
	}
	_ = rec
}

func TestOAuthConfig(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"command": "x", "oauth": {}}`, "oauth applies only to a url"},
		{`{"url": "https://x", "oauth": {"clientID": "a"}}`, `field "oauth" must be an object`},
		{`{"url": "https://x", "oauth": {"clientSecret": "a"}}`, "oauth.clientSecret needs oauth.clientId"},
		{`{"url": "https://x", "oauth": {"scopes": ["a b"]}}`, "is not a scope"},
		{`{"url": "https://x", "oauth": {"clientId": "${CODEMODE_TEST_UNSET_VAR}"}}`, ""},
	} {
		cfg, err := ParseConfig([]byte(`{"mcpServers": {"s": ` + tc.json + `}}`))
		if tc.want == "" {
			if err != nil || cfg.Servers["s"].problem == nil || !strings.Contains(cfg.Servers["s"].problem.Error(), "oauth.clientId") {
				t.Errorf("%s: err %v, problem %v", tc.json, err, cfg.Servers["s"].problem)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.json, err, tc.want)
		}
	}
	// An Authorization header means no OAuth.
	sc := UpstreamConfig{URL: "https://x", Headers: map[string]string{"authorization": "Bearer x"}}
	if sc.usesOAuth() {
		t.Error("usesOAuth with an Authorization header")
	}
}

// TestOAuthUnsafeTokenFile: a token file others can read is refused.
func TestOAuthUnsafeTokenFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix modes")
	}
	srv := oauthtest.New(t, oauthtest.Options{})
	dir := t.TempDir()
	res := login(t, secureConfig(srv), "secure", dir)
	if err := os.Chmod(res.TokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	up := connect(t, secureConfig(srv), ClientOptions{TokenDir: dir, Lenient: true})
	if un := up.Unavailable(); len(un) != 1 || !strings.Contains(un[0].Reason, "chmod 600") {
		t.Fatalf("unavailable %+v", un)
	}
}

// TestResourceTransport: only a refresh request to the token endpoint
// that names no resource gets one; every other request, a body too large
// to be a token request included, reaches the server as it was sent.
func TestResourceTransport(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.URL.Path+" "+string(b))
	}))
	t.Cleanup(srv.Close)
	hc := resourceClient(srv.Client(), srv.URL+"/token", "https://mcp.example/mcp")
	big := "grant_type=refresh_token&x=" + strings.Repeat("a", 1<<17)
	for _, tc := range []struct{ path, body, want string }{
		{"/token", "grant_type=refresh_token&refresh_token=r1", "/token grant_type=refresh_token&refresh_token=r1&resource=https%3A%2F%2Fmcp.example%2Fmcp"},
		{"/token", "grant_type=refresh_token&resource=other", "/token grant_type=refresh_token&resource=other"},
		{"/token", "grant_type=authorization_code&code=c", "/token grant_type=authorization_code&code=c"},
		{"/elsewhere", "grant_type=refresh_token", "/elsewhere grant_type=refresh_token"},
		{"/token", big, "/token " + big},
	} {
		got = nil
		resp, err := hc.Post(srv.URL+tc.path, "application/x-www-form-urlencoded", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(got) != 1 || got[0] != tc.want {
			g := fmt.Sprint(got)
			if len(g) > 200 {
				g = g[:200] + "…"
			}
			t.Errorf("%s %.60q: server got %s", tc.path, tc.body, g)
		}
	}
	if resourceClient(srv.Client(), srv.URL+"/token", "") != srv.Client() {
		t.Error("without a resource the client should be the one given")
	}
}
