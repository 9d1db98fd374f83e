package mcp

import (
	"context"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codemode-go/codemode/internal/redact"
	"github.com/modelcontextprotocol/go-sdk/auth"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// LoginOptions configure [Login].
type LoginOptions struct {
	// Open shows the authorization URL to the user, in a browser. It
	// returns once the browser has it, not when the user has answered.
	// Required.
	Open func(ctx context.Context, url string) error

	// Wait bounds the wait for the user to answer in the browser. Zero
	// means five minutes.
	Wait time.Duration

	// Name and Version identify codemode to the server and, as the
	// client name, to the authorization server. Empty means "codemode"
	// and "dev".
	Name, Version string

	// TokenDir is ClientOptions.TokenDir: where the token is stored.
	TokenDir string

	// HTTPClient is ClientOptions.HTTPClient.
	HTTPClient *http.Client

	// Logger receives the SDK's records, redacted. Nil discards them.
	Logger *slog.Logger
}

// LoginResult is what a successful [Login] did.
type LoginResult struct {
	// Authorized is false when the server did not ask for authorization:
	// nothing was stored.
	Authorized bool
	// Scopes were granted (as requested, when the token does not say).
	Scopes []string
	// Tools is how many tools the server listed with the new token.
	Tools int
	// TokenFile is where the token is stored.
	TokenFile string
	// Refreshable says whether the server issued a refresh token, so
	// that codemode mcp can renew the token without another login.
	Refreshable bool
}

// Login authorizes codemode to the URL server name of cfg with OAuth, as
// the MCP authorization specification describes, and stores the token for
// [Connect] (codemode mcp) to use: it connects, and when the server
// answers 401 it discovers the authorization server (the
// WWW-Authenticate challenge's resource_metadata, else the server's
// /.well-known/oauth-protected-resource; then the authorization server's
// RFC 8414 or OpenID Connect metadata), uses the configured client
// (UpstreamConfig.OAuth) or registers one (RFC 7591), and runs the
// authorization code flow with PKCE (S256) and the resource parameter
// (RFC 8707): opts.Open shows the authorization page, and a listener on
// 127.0.0.1 receives the redirect. Scopes requested are the challenge's,
// else the server's scopes_supported, with the configured ones, the ones
// granted before and the ones the server asked for since (a 403
// insufficient_scope that codemode mcp met); a 403 insufficient_scope
// during the login itself is answered by authorizing again with the
// larger scope. The login ends by listing the server's tools with the
// new token.
//
// The token file (mode 0600, in a directory of mode 0700) holds the
// access and refresh tokens and the client's registration; it is used
// only for the server's URL.
func Login(ctx context.Context, cfg *Config, name string, opts LoginOptions) (*LoginResult, error) {
	if opts.Open == nil {
		return nil, errors.New("mcp: Login needs LoginOptions.Open")
	}
	if opts.Wait <= 0 {
		opts.Wait = 5 * time.Minute
	}
	if opts.Name == "" {
		opts.Name = "codemode"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if cfg == nil {
		cfg = &Config{}
	}
	sc, ok := cfg.Servers[name]
	if !ok {
		names := make([]string, 0, len(cfg.Servers))
		for n := range cfg.Servers {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("no server %q in the config (it has %s)", name, strings.Join(names, ", "))
	}
	if sc.problem != nil {
		return nil, fmt.Errorf("server %q: %v", name, sc.problem)
	}
	if sc.transport() == TypeStdio {
		return nil, fmt.Errorf("server %q is a command: OAuth is for URL servers (a command's credentials go in its env)", name)
	}
	if sc.transport() == TypeSSE {
		return nil, fmt.Errorf("server %q is an HTTP+SSE server: codemode authorizes streamable HTTP servers only", name)
	}
	if !sc.usesOAuth() {
		return nil, fmt.Errorf("server %q has an Authorization header configured, which replaces any OAuth token: remove it to use OAuth", name)
	}
	dir, err := tokenDir(opts.TokenDir)
	if err != nil {
		return nil, err
	}
	path := tokenFile(dir, name, sc.URL)
	prev, err := loadToken(path, sc.URL)
	if err != nil {
		prev = nil // replaced by this login
	}

	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var secretsMu sync.Mutex
	secrets := sc.secrets()
	red := func() *redact.Redactor {
		secretsMu.Lock()
		defer secretsMu.Unlock()
		return redact.New(secrets...)
	}
	logger = slog.New(redact.LiveHandler(logger.Handler(), red)).With("server", name)
	addSecrets := func(s ...string) {
		secretsMu.Lock()
		secrets = append(secrets, s...)
		secretsMu.Unlock()
	}

	// The redirect listener: loopback only, on the configured port or a
	// random one.
	port := 0
	if sc.OAuth != nil {
		port = sc.OAuth.CallbackPort
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("listening for the authorization redirect: %w", err)
	}
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", ln.Addr().(*net.TCPAddr).Port)
	cb := newCallback()
	srv := &http.Server{Handler: cb, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	hc := oauthHTTPClient(opts.HTTPClient, http.DefaultTransport.(*http.Transport), sc.URL)
	var (
		mu       sync.Mutex
		granted  *oauth2.Token
		conf     *oauth2.Config
		resource string // the authorization request's, for the refreshes
	)
	hcfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:           redirect,
		Client:                hc,
		RequestRefreshToken:   true,
		AcceptUnadvertisedIss: true,
		ScopeFilter: func(discovered []string) []string {
			out := slices.Clone(discovered)
			var more []string
			if sc.OAuth != nil {
				more = append(more, sc.OAuth.Scopes...)
			}
			if prev != nil {
				more = append(append(more, prev.Scopes...), prev.Pending...)
			}
			for _, s := range more {
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
			return out
		},
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			if u, err := url.Parse(args.URL); err == nil {
				mu.Lock()
				resource = u.Query().Get("resource")
				mu.Unlock()
			}
			if err := opts.Open(ctx, args.URL); err != nil {
				return nil, err
			}
			return cb.wait(ctx, opts.Wait)
		},
		NewTokenSource: func(ctx context.Context, c *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			addSecrets(tok.AccessToken, tok.RefreshToken, c.ClientSecret)
			mu.Lock()
			granted, conf = tok, c
			res := resource
			mu.Unlock()
			// A token that expires at once is refreshed during the
			// login: what is stored is the latest, whose refresh token
			// has not been used (the server may rotate them).
			ctx = context.WithValue(ctx, oauth2.HTTPClient, resourceClient(hc, c.Endpoint.TokenURL, res))
			return latest{base: c.TokenSource(ctx, tok), seen: func(t *oauth2.Token) {
				addSecrets(t.AccessToken, t.RefreshToken)
				mu.Lock()
				if conf == c {
					granted = t // oauth2 keeps the refresh token when it is not rotated
				}
				mu.Unlock()
			}}, nil
		},
	}
	if o := sc.OAuth; o != nil && o.ClientID != "" {
		cred := &oauthex.ClientCredentials{ClientID: o.ClientID}
		if o.ClientSecret != "" {
			cred.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: o.ClientSecret}
		}
		hcfg.PreregisteredClient = cred
	} else {
		hcfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				RedirectURIs:            []string{redirect},
				ClientName:              opts.Name,
				GrantTypes:              []string{"authorization_code", "refresh_token"},
				ResponseTypes:           []string{"code"},
				TokenEndpointAuthMethod: "none",
				SoftwareID:              "github.com/codemode-go/codemode",
				SoftwareVersion:         opts.Version,
			},
		}
	}
	handler, err := auth.NewAuthorizationCodeHandler(hcfg)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", name, err)
	}

	// The MCP connection, as codemode mcp makes it: the configured
	// headers for the server's origin, no redirect off it.
	u := &Upstreams{opts: ClientOptions{HTTPClient: opts.HTTPClient}, log: logger, transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer u.transport.CloseIdleConnections()
	up := &upstream{u: u, name: name, cfg: sc}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: opts.Name, Version: opts.Version}, &mcpsdk.ClientOptions{
		Logger: logger, Capabilities: &mcpsdk.ClientCapabilities{},
	})
	res := &LoginResult{TokenFile: path}
	cs, err := client.Connect(ctx, &mcpsdk.StreamableClientTransport{Endpoint: sc.URL, HTTPClient: up.httpClient(), OAuthHandler: handler},
		&mcpsdk.ClientSessionOptions{ProtocolVersion: DefaultProtocolVersion})
	var listErr error
	if err == nil {
		var list []*mcpsdk.Tool
		list, listErr = listTools(ctx, cs, logger)
		res.Tools = len(list)
		_ = cs.Close()
	}
	mu.Lock()
	tok, c, grantedFor := granted, conf, resource
	mu.Unlock()
	if tok == nil {
		if err != nil {
			return nil, redact.New(secrets...).Error(fmt.Errorf("server %q: %w", name, err))
		}
		return res, nil // the server did not ask
	}
	rec := &tokenRecord{
		Server: name, URL: sc.URL,
		TokenEndpoint: c.Endpoint.TokenURL, AuthStyle: int(c.Endpoint.AuthStyle),
		Resource: grantedFor,
		ClientID: c.ClientID,
		Scopes:   grantedScopes(tok, c.Scopes),
		Token:    tok,
	}
	if sc.OAuth == nil || sc.OAuth.ClientSecret != c.ClientSecret {
		rec.ClientSecret = c.ClientSecret // issued by the registration
	}
	if serr := saveToken(path, rec); serr != nil {
		return nil, serr
	}
	res.Authorized, res.Scopes, res.Refreshable = true, rec.Scopes, tok.RefreshToken != ""
	if err == nil {
		err = listErr
	}
	if err != nil {
		return res, redact.New(secrets...).Error(fmt.Errorf("server %q: the token is stored, but %w", name, err))
	}
	return res, nil
}

// latest passes on its base's tokens, telling seen about each.
type latest struct {
	base oauth2.TokenSource
	seen func(*oauth2.Token)
}

func (l latest) Token() (*oauth2.Token, error) {
	t, err := l.base.Token()
	if err == nil {
		l.seen(t)
	}
	return t, err
}

// grantedScopes are the token's "scope" (RFC 6749 §5.1), else the
// requested ones.
func grantedScopes(tok *oauth2.Token, requested []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return slices.Clone(requested)
}

// callback receives the authorization server's redirect.
type callback struct {
	results chan callbackResult
}

type callbackResult struct {
	res *auth.AuthorizationResult
	err error
}

func newCallback() *callback { return &callback{results: make(chan callbackResult, 1)} }

func (c *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/callback" {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	var out callbackResult
	switch {
	case q.Get("error") != "":
		msg := q.Get("error")
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		out.err = fmt.Errorf("the authorization server refused: %s", msg)
	case q.Get("code") == "":
		http.Error(w, "no authorization code in the redirect", http.StatusBadRequest)
		return
	default:
		out.res = &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
	}
	select {
	case c.results <- out:
	default:
		http.Error(w, "this authorization was already answered", http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	title := "codemode is authorized"
	body := "You can close this tab and go back to the terminal."
	if out.err != nil {
		title, body = "codemode was not authorized", html.EscapeString(out.err.Error())
	}
	fmt.Fprintf(w, "<!doctype html><title>%s</title><h1>%s</h1><p>%s</p>\n", title, title, body)
}

// wait waits for the redirect, within d.
func (c *callback) wait(ctx context.Context, d time.Duration) (*auth.AuthorizationResult, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-c.results:
		return r.res, r.err
	case <-t.C:
		return nil, fmt.Errorf("no answer from the browser within %s", d)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
