package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// OAuth for URL servers.
//
// A server that needs OAuth answers 401 with a WWW-Authenticate challenge.
// The MCP authorization specification has the client discover the
// authorization server (RFC 9728 protected-resource metadata, then RFC
// 8414 authorization-server metadata), register (RFC 7591) or use a
// pre-registered client, and send the user through the authorization code
// flow with PKCE in a browser. That last step needs a person, and codemode
// mcp is started by an MCP client app with nobody at its terminal, so it
// is done ahead of time, by "codemode login NAME" ([Login]), which stores
// the token in the per-user configuration directory. codemode mcp
// ([Connect]) then sends the stored token, refreshes it when it expires
// (storing the new one), and when there is none, or it was refused and
// cannot be refreshed, reports the server unavailable with the login
// command to run: it does not open a browser itself, and does not retry
// the server as an HTTP+SSE one, which would only be refused again.

// LoginRequiredError is the error of a server that needs an OAuth
// authorization that codemode mcp cannot obtain by itself: there is no
// stored token, the stored one was refused and could not be refreshed,
// or the server asks for a scope it does not grant (403
// insufficient_scope). Its message says which login command to run.
type LoginRequiredError struct {
	Server string
	// Reason says what is missing: "no token is stored for it".
	Reason string
	// Command is the command that authorizes it: "codemode login NAME".
	Command string
}

func (e *LoginRequiredError) Error() string {
	return fmt.Sprintf("it needs an OAuth authorization: %s; run %q to authorize codemode", e.Reason, e.Command)
}

// oauthClient is the auth.OAuthHandler of a URL server in codemode mcp:
// the stored token, refreshed and stored again when it expires. It never
// starts an authorization: that is Login's.
type oauthClient struct {
	up   *upstream
	path string // the token file
	http *http.Client

	mu     sync.Mutex
	read   bool      // the file was read once
	loaded time.Time // the file's modification time when read
	rec    *tokenRecord
	ts     oauth2.TokenSource // refreshing rec.Token; nil without a record
	err    error              // why the file could not be read
}

var _ auth.OAuthHandler = (*oauthClient)(nil)

// newOAuthClient returns the handler of a URL server that may use OAuth,
// or nil.
func (up *upstream) newOAuthClient() *oauthClient {
	if !up.cfg.usesOAuth() {
		return nil
	}
	dir, err := tokenDir(up.u.opts.TokenDir)
	if err != nil {
		return &oauthClient{up: up, err: err}
	}
	return &oauthClient{up: up, path: tokenFile(dir, up.name, up.cfg.URL), http: up.oauthHTTPClient()}
}

// reload reads the token file again if it changed since it was read, as
// it does after a login in another process. It holds c.mu.
func (c *oauthClient) reload() {
	if c.path == "" {
		return
	}
	mt := modTime(c.path)
	if c.read && mt.Equal(c.loaded) {
		return
	}
	rec, err := loadToken(c.path, c.up.cfg.URL)
	c.read, c.loaded, c.rec, c.err, c.ts = true, mt, rec, err, nil
	if rec != nil {
		c.up.addTokenSecrets(rec.Token)
		c.ts = c.source(rec)
	}
}

// changed reports whether the token file changed since it was read: a
// login happened, and a server waiting out its backoff may try again.
func (c *oauthClient) changed() bool {
	if c == nil || c.path == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read && !modTime(c.path).Equal(c.loaded)
}

// config is the oauth2 configuration that refreshes rec's token.
func (c *oauthClient) config(rec *tokenRecord) *oauth2.Config {
	secret := rec.ClientSecret
	if o := c.up.cfg.OAuth; o != nil && o.ClientID == rec.ClientID && o.ClientSecret != "" {
		secret = o.ClientSecret
	}
	return &oauth2.Config{
		ClientID:     rec.ClientID,
		ClientSecret: secret,
		Endpoint:     oauth2.Endpoint{TokenURL: rec.TokenEndpoint, AuthStyle: oauth2.AuthStyle(rec.AuthStyle)},
		Scopes:       rec.Scopes,
	}
}

// source is a token source for rec that stores every new token.
func (c *oauthClient) source(rec *tokenRecord) oauth2.TokenSource {
	// The refreshes outlive any one request: a context of their own,
	// carrying our HTTP client.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, c.refreshClient(rec))
	return &storingSource{c: c, rec: rec, base: c.config(rec).TokenSource(ctx, rec.Token)}
}

// refreshClient is the HTTP client that refreshes rec's token.
func (c *oauthClient) refreshClient(rec *tokenRecord) *http.Client {
	return resourceClient(c.http, rec.TokenEndpoint, rec.Resource)
}

// TokenSource returns the stored token's source, nil when none is stored.
func (c *oauthClient) TokenSource(context.Context) (oauth2.TokenSource, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reload()
	if c.ts == nil {
		return nil, nil // no Authorization header: the server says 401
	}
	return c.ts, nil
}

// storingSource stores each token its base source refreshes.
type storingSource struct {
	c    *oauthClient
	rec  *tokenRecord
	base oauth2.TokenSource
}

func (s *storingSource) Token() (*oauth2.Token, error) {
	tok, err := s.base.Token()
	if err != nil {
		s.c.up.log.Warn("refreshing the OAuth token failed", "error", oauthError(err))
		return nil, err
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if tok.AccessToken != s.rec.Token.AccessToken && s.rec == s.c.rec {
		s.c.store(s.rec, tok)
	}
	return tok, nil
}

// store saves a refreshed token. It holds c.mu.
func (c *oauthClient) store(rec *tokenRecord, tok *oauth2.Token) {
	c.up.addTokenSecrets(tok)
	if tok.RefreshToken == "" {
		// Kept when not rotated (oauth2 does that too), on a copy: the
		// token is shared with the source that returned it.
		t := *tok
		t.RefreshToken = rec.Token.RefreshToken
		tok = &t
	}
	next := *rec
	next.Token = tok
	*rec = next
	if err := saveToken(c.path, rec); err != nil {
		c.up.log.Warn("the refreshed OAuth token could not be stored; it is used until codemode exits", "error", err)
		return
	}
	c.loaded = modTime(c.path)
	c.up.log.Info("OAuth token refreshed", "expires", tok.Expiry.Round(time.Second))
}

// Authorize is called when a request was refused (401, or 403). It
// refreshes a token the server refused though it had not expired, which
// makes the transport retry the request; otherwise it fails with a
// LoginRequiredError.
func (c *oauthClient) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	bearer := func(param string) string {
		for _, ch := range challenges {
			if ch.Scheme == "bearer" && ch.Params[param] != "" {
				return ch.Params[param]
			}
		}
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reload()
	if c.err != nil {
		return c.loginRequired(c.err.Error())
	}
	if resp.StatusCode == http.StatusForbidden {
		if bearer("error") != "insufficient_scope" {
			return nil // a refusal OAuth cannot fix: the retry reports it
		}
		scopes := strings.Fields(bearer("scope"))
		if c.rec != nil {
			for _, s := range scopes {
				if !slices.Contains(c.rec.Scopes, s) && !slices.Contains(c.rec.Pending, s) {
					c.rec.Pending = append(c.rec.Pending, s)
				}
			}
			// The next login asks for them too.
			if err := saveToken(c.path, c.rec); err == nil {
				c.loaded = modTime(c.path)
			}
		}
		what := "more access than it was granted"
		if len(scopes) > 0 {
			what = fmt.Sprintf("the scope %q", strings.Join(scopes, " "))
		}
		c.up.log.Error("the server asks for more OAuth scope than was granted: log in again", "scope", strings.Join(scopes, " "), "command", c.command())
		return c.loginRequired("the server asks for " + what)
	}
	if c.rec == nil {
		return c.loginRequired("no token is stored for it")
	}
	sent := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
	if sent != "" && sent != c.rec.Token.AccessToken {
		return nil // a newer token arrived meanwhile (a login): retry with it
	}
	if c.rec.Token.RefreshToken == "" {
		return c.loginRequired("the stored token was refused, and there is no refresh token")
	}
	// Refused before its expiry (revoked, or the server's clock), or
	// its refresh failed: a refresh may fix it, and the transport
	// retries the request once.
	expired := *c.rec.Token
	expired.Expiry = time.Unix(1, 0)
	hctx := context.WithValue(ctx, oauth2.HTTPClient, c.refreshClient(c.rec))
	tok, err := c.config(c.rec).TokenSource(hctx, &expired).Token()
	if err != nil {
		c.up.log.Error("the server refused the OAuth token and refreshing it failed: log in again", "error", oauthError(err), "command", c.command())
		return c.loginRequired("the stored token was refused and could not be refreshed")
	}
	c.store(c.rec, tok)
	c.ts = c.source(c.rec)
	return nil
}

func (c *oauthClient) command() string {
	if f := c.up.u.opts.LoginCommand; f != nil {
		return f(c.up.name)
	}
	return "codemode login " + c.up.name
}

func (c *oauthClient) loginRequired(reason string) error {
	return &LoginRequiredError{Server: c.up.name, Reason: reason, Command: c.command()}
}

// oauthError is an oauth2 error without the token endpoint's response
// body, which could hold anything.
func oauthError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return fmt.Errorf("the token endpoint answered %s", re.ErrorCode)
		}
		if re.Response != nil {
			return fmt.Errorf("the token endpoint answered %s", re.Response.Status)
		}
	}
	return err
}

// oauthHTTPClient is the client for the authorization server's endpoints
// (metadata, registration, token). It does not send the configured
// headers, which are the MCP server's. The SDK's discovery refuses
// addresses on private networks (a server could point it at the host's
// own services), unless the MCP server itself is on one: a server the
// user configured on localhost or the LAN has its authorization server
// there too.
func (up *upstream) oauthHTTPClient() *http.Client {
	return oauthHTTPClient(up.u.opts.HTTPClient, up.u.transport, up.cfg.URL)
}

func oauthHTTPClient(host *http.Client, ours *http.Transport, serverURL string) *http.Client {
	if host != nil {
		c := *host
		return &c
	}
	t := ours.Clone()
	if !privateHost(serverURL) {
		t.DialContext = nil // the SDK adds its checks to a transport that does not dial itself
	}
	return &http.Client{Transport: t, Timeout: time.Minute}
}

// resourceClient is hc made to name resource in the refresh requests it
// sends to tokenURL. The MCP authorization specification has the resource
// parameter (RFC 8707) in every token request, so that a server issuing
// audience-bound tokens can refresh one, but oauth2 refreshes with no way
// to add a parameter.
func resourceClient(hc *http.Client, tokenURL, resource string) *http.Client {
	if resource == "" {
		return hc
	}
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &resourceTransport{base: base, tokenURL: tokenURL, resource: resource}
	return &c
}

type resourceTransport struct {
	base               http.RoundTripper
	tokenURL, resource string
}

func (t *resourceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil || req.URL.String() != t.tokenURL {
		return t.base.RoundTrip(req)
	}
	// A token request is a small form; a larger body is not ours to
	// rewrite and goes on whole, as it came.
	const most = 1 << 16
	body, err := io.ReadAll(io.LimitReader(req.Body, most+1))
	if err != nil {
		req.Body.Close()
		return nil, err
	}
	r := req.Clone(req.Context()) // a RoundTripper does not change its request
	if len(body) > most {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
		return t.base.RoundTrip(r)
	}
	req.Body.Close()
	if form, err := url.ParseQuery(string(body)); err == nil && form.Get("grant_type") == "refresh_token" && !form.Has("resource") {
		form.Set("resource", t.resource)
		body = []byte(form.Encode())
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return t.base.RoundTrip(r)
}

// privateHost reports whether a URL's host is a loopback or private
// address, or localhost.
func privateHost(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		ips, err := net.LookupIP(h)
		if err != nil || len(ips) == 0 {
			return false
		}
		for _, a := range ips {
			if !a.IsLoopback() && !a.IsPrivate() {
				return false
			}
		}
		return true
	}
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast()
}
