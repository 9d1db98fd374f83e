// Package oauthtest serves, on loopback, an MCP server protected by OAuth
// and the authorization server that issues its tokens, as the MCP
// authorization specification describes them: protected-resource
// metadata (RFC 9728), authorization-server metadata (RFC 8414), dynamic
// client registration (RFC 7591), an authorization endpoint that approves
// every request at once (no login page: a test's "browser" only follows
// its redirect), and a token endpoint that checks PKCE (S256), the
// resource parameter (RFC 8707) and client authentication, and issues and
// rotates refresh tokens. It is for tests.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Scopes the server knows.
const (
	ScopeRead  = "mcp:read"  // every tool needs it; the 401 challenge names it
	ScopeAdmin = "mcp:admin" // the "admin" tool needs it too (403 insufficient_scope)
)

// Options configure a Server. The zero value is a server that registers
// clients dynamically and issues one-hour tokens with refresh tokens.
type Options struct {
	// TokenTTL is the access tokens' lifetime (expires_in). Zero means an
	// hour.
	TokenTTL time.Duration
	// ClientID and ClientSecret pre-register a client; AuthMethod is its
	// token endpoint authentication: client_secret_basic (the default
	// with a secret), client_secret_post or none.
	ClientID, ClientSecret, AuthMethod string
	// NoRegistration leaves out the registration endpoint.
	NoRegistration bool
	// RootMetadataOnly serves the protected-resource metadata only at
	// the origin's root, /.well-known/oauth-protected-resource, and
	// leaves resource_metadata out of the challenge: the client must
	// find it by itself.
	RootMetadataOnly bool
	// OpenIDOnly serves the authorization server's metadata only at
	// /.well-known/openid-configuration.
	OpenIDOnly bool
	// LenientRefresh accepts a refresh request that does not name the
	// grant's resource. By default one is refused (invalid_target), as
	// an authorization server that issues audience-bound tokens may: the
	// MCP authorization specification has clients send the resource
	// parameter in every token request (RFC 8707 §2.2).
	LenientRefresh bool
}

// Server is the protected MCP server and its authorization server, on
// two loopback origins.
type Server struct {
	// MCPURL is the MCP endpoint, protected.
	MCPURL string
	// Resource is its resource identifier (RFC 8707), the value of the
	// tokens' audience: MCPURL, or with RootMetadataOnly its origin, as
	// the metadata at the root describes the origin (RFC 9728 §3.3).
	Resource string
	// Issuer is the authorization server's issuer URL.
	Issuer string

	opts Options
	rs   *httptest.Server
	as   *httptest.Server

	mu      sync.Mutex
	clients map[string]*client
	codes   map[string]*grant
	access  map[string]*grant
	refresh map[string]*grant
	counts  Counts
}

// Counts counts what the authorization server did.
type Counts struct {
	Registrations  int // clients registered
	Authorizations int // codes issued
	CodeExchanges  int // codes exchanged for tokens
	Refreshes      int // refresh tokens exchanged
	Unauthorized   int // 401s of the MCP server
	Forbidden      int // 403 insufficient_scope of the MCP server
}

type client struct {
	id, secret, method string
	redirects          []string
}

type grant struct {
	client    string
	scopes    []string
	redirect  string
	challenge string
	resource  string
	expires   time.Time
}

// New starts the servers; they stop when the test ends.
func New(t testing.TB, opts Options) *Server {
	if opts.TokenTTL == 0 {
		opts.TokenTTL = time.Hour
	}
	s := &Server{opts: opts, clients: map[string]*client{}, codes: map[string]*grant{},
		access: map[string]*grant{}, refresh: map[string]*grant{}}
	if opts.ClientID != "" {
		m := opts.AuthMethod
		if m == "" {
			m = "client_secret_basic"
			if opts.ClientSecret == "" {
				m = "none"
			}
		}
		s.clients[opts.ClientID] = &client{id: opts.ClientID, secret: opts.ClientSecret, method: m}
	}
	s.as = httptest.NewServer(http.HandlerFunc(s.serveAS))
	s.Issuer = s.as.URL
	s.rs = httptest.NewServer(s.resourceServer())
	s.MCPURL = s.rs.URL + "/mcp"
	s.Resource = s.MCPURL
	if opts.RootMetadataOnly {
		s.Resource = s.rs.URL
	}
	t.Cleanup(func() {
		s.rs.CloseClientConnections()
		s.rs.Close()
		s.as.Close()
	})
	return s
}

// Counts returns the counters so far.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// RevokeAccessTokens makes every access token issued so far invalid, as
// a server that restarted or revoked them would; refresh tokens stay
// valid.
func (s *Server) RevokeAccessTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.access)
}

// RevokeAll makes every token invalid, refresh tokens included.
func (s *Server) RevokeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.access)
	clear(s.refresh)
}

func random() string { return rand.Text() }

// ---- the protected MCP server

func (s *Server) resourceServer() http.Handler {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "protected", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	text := func(s string) *mcpsdk.CallToolResult {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s}}}
	}
	srv.AddTool(&mcpsdk.Tool{Name: "whoami", Description: "Says who the token is for.", InputSchema: obj},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			ti := req.Extra.TokenInfo
			return text(fmt.Sprintf("hello %s, scopes %s", ti.UserID, strings.Join(ti.Scopes, " "))), nil
		})
	srv.AddTool(&mcpsdk.Tool{Name: "echo_auth", Description: "Echoes the Authorization header (to test redaction).", InputSchema: obj},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return text("you sent " + req.Extra.Header.Get("Authorization")), nil
		})
	srv.AddTool(&mcpsdk.Tool{Name: "admin", Description: "Needs the mcp:admin scope.", InputSchema: obj},
		func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return text("admin done"), nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	mux := http.NewServeMux()
	prm := func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:             s.Resource,
			AuthorizationServers: []string{s.Issuer},
			ScopesSupported:      []string{ScopeRead, ScopeAdmin},
		}).ServeHTTP(w, r)
	}
	if s.opts.RootMetadataOnly {
		mux.HandleFunc("/.well-known/oauth-protected-resource", prm)
	} else {
		mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", prm)
	}
	mux.Handle("/mcp", s.protect(h))
	return mux
}

// protect checks the bearer token of every request, and the admin scope
// of a call of the admin tool.
func (s *Server) protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		challenge := func(extra string) string {
			var params []string
			if !s.opts.RootMetadataOnly {
				params = append(params, fmt.Sprintf("resource_metadata=%q", s.rs.URL+"/.well-known/oauth-protected-resource/mcp"))
			}
			return "Bearer " + strings.Join(append(params, extra), ", ")
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.mu.Lock()
		g := s.access[tok]
		valid := ok && g != nil && time.Now().Before(g.expires) && g.resource == s.Resource
		if !valid {
			s.counts.Unauthorized++
		}
		s.mu.Unlock()
		if !valid {
			w.Header().Set("WWW-Authenticate", challenge(fmt.Sprintf(`scope=%q`, ScopeRead)))
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost && !slices.Contains(g.scopes, ScopeAdmin) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && msg.Params.Name == "admin" {
				s.mu.Lock()
				s.counts.Forbidden++
				s.mu.Unlock()
				w.Header().Set("WWW-Authenticate", challenge(fmt.Sprintf(`error="insufficient_scope", scope=%q`, ScopeRead+" "+ScopeAdmin)))
				http.Error(w, "insufficient scope", http.StatusForbidden)
				return
			}
		}
		s.withTokenInfo(next).ServeHTTP(w, r)
	})
}

// withTokenInfo gives the tools the token's TokenInfo (the token was
// checked already).
func (s *Server) withTokenInfo(next http.Handler) http.Handler {
	return auth.RequireBearerToken(func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		g := s.access[tok]
		if g == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Scopes: g.scopes, Expiration: g.expires, UserID: "user-1"}, nil
	}, nil)(next)
}

// ---- the authorization server

func (s *Server) serveAS(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		if s.opts.OpenIDOnly {
			http.NotFound(w, r)
			return
		}
		s.metadata(w)
	case "/.well-known/openid-configuration":
		s.metadata(w)
	case "/register":
		if s.opts.NoRegistration {
			http.NotFound(w, r)
			return
		}
		s.register(w, r)
	case "/authorize":
		s.authorize(w, r)
	case "/token":
		s.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthErr(w http.ResponseWriter, code int, e, desc string) {
	writeJSON(w, code, map[string]string{"error": e, "error_description": desc})
}

func (s *Server) metadata(w http.ResponseWriter) {
	m := map[string]any{
		"issuer":                                s.Issuer,
		"authorization_endpoint":                s.Issuer + "/authorize",
		"token_endpoint":                        s.Issuer + "/token",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
		"scopes_supported":                      []string{ScopeRead, ScopeAdmin, "offline_access"},
	}
	if !s.opts.NoRegistration {
		m["registration_endpoint"] = s.Issuer + "/register"
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST", http.StatusMethodNotAllowed)
		return
	}
	var meta oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&meta); err != nil || len(meta.RedirectURIs) == 0 {
		oauthErr(w, http.StatusBadRequest, "invalid_client_metadata", "redirect_uris required")
		return
	}
	for _, u := range meta.RedirectURIs {
		if p, err := url.Parse(u); err != nil || p.Scheme != "http" || p.Hostname() != "127.0.0.1" {
			oauthErr(w, http.StatusBadRequest, "invalid_redirect_uri", "loopback redirects only")
			return
		}
	}
	c := &client{id: "dyn-" + random(), method: meta.TokenEndpointAuthMethod, redirects: meta.RedirectURIs}
	if c.method == "" {
		c.method = "client_secret_basic"
	}
	if c.method != "none" {
		c.secret = random()
	}
	s.mu.Lock()
	s.clients[c.id] = c
	s.counts.Registrations++
	s.mu.Unlock()
	resp := map[string]any{"client_id": c.id, "redirect_uris": c.redirects, "token_endpoint_auth_method": c.method,
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}}
	if c.secret != "" {
		resp["client_secret"] = c.secret
	}
	writeJSON(w, http.StatusCreated, resp)
}

// authorize approves at once and redirects with a code (or an error, to
// the redirect URI when it can be trusted).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	c := s.clients[q.Get("client_id")]
	s.mu.Unlock()
	redirect := q.Get("redirect_uri")
	if c == nil {
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	}
	if len(c.redirects) > 0 && !slices.Contains(c.redirects, redirect) || !loopbackRedirect(redirect) {
		http.Error(w, "redirect_uri not registered", http.StatusBadRequest)
		return
	}
	fail := func(e, desc string) {
		u, _ := url.Parse(redirect)
		v := u.Query()
		v.Set("error", e)
		v.Set("error_description", desc)
		v.Set("state", q.Get("state"))
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusFound)
	}
	switch {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "code only")
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		fail("invalid_request", "PKCE with S256 is required")
		return
	case q.Get("resource") != s.Resource:
		fail("invalid_target", fmt.Sprintf("resource %q is not %q", q.Get("resource"), s.Resource))
		return
	}
	code := random()
	var scopes []string
	for _, sc := range strings.Fields(q.Get("scope")) {
		if sc == ScopeRead || sc == ScopeAdmin || sc == "offline_access" {
			scopes = append(scopes, sc)
		}
	}
	s.mu.Lock()
	s.codes[code] = &grant{client: c.id, scopes: scopes, redirect: redirect, challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), expires: time.Now().Add(time.Minute)}
	s.counts.Authorizations++
	s.mu.Unlock()
	u, _ := url.Parse(redirect)
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// loopbackRedirect accepts http://127.0.0.1:PORT/... redirects only.
func loopbackRedirect(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "http" && u.Hostname() == "127.0.0.1"
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		oauthErr(w, http.StatusBadRequest, "invalid_request", "POST a form")
		return
	}
	// Client authentication, by the client's registered method.
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[id]
	if c == nil {
		oauthErr(w, http.StatusUnauthorized, "invalid_client", "unknown client")
		return
	}
	switch c.method {
	case "client_secret_basic":
		if !basic || secret != c.secret {
			oauthErr(w, http.StatusUnauthorized, "invalid_client", "client_secret_basic required")
			return
		}
	case "client_secret_post":
		if basic || secret != c.secret {
			oauthErr(w, http.StatusUnauthorized, "invalid_client", "client_secret_post required")
			return
		}
	}
	var g *grant
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		code := r.PostForm.Get("code")
		g = s.codes[code]
		delete(s.codes, code) // one use
		if g == nil || g.client != id || time.Now().After(g.expires) {
			oauthErr(w, http.StatusBadRequest, "invalid_grant", "unknown or used code")
			return
		}
		if r.PostForm.Get("redirect_uri") != g.redirect {
			oauthErr(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs")
			return
		}
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			oauthErr(w, http.StatusBadRequest, "invalid_grant", "PKCE verification failed")
			return
		}
		if res := r.PostForm.Get("resource"); res != "" && res != g.resource {
			oauthErr(w, http.StatusBadRequest, "invalid_target", "resource differs")
			return
		}
		s.counts.CodeExchanges++
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		g = s.refresh[rt]
		delete(s.refresh, rt) // rotated
		if g == nil || g.client != id {
			oauthErr(w, http.StatusBadRequest, "invalid_grant", "unknown refresh token")
			return
		}
		if res := r.PostForm.Get("resource"); res != g.resource && (res != "" || !s.opts.LenientRefresh) {
			s.refresh[rt] = g // a refused request does not use the token up
			oauthErr(w, http.StatusBadRequest, "invalid_target", fmt.Sprintf("resource %q is not the grant's", res))
			return
		}
		s.counts.Refreshes++
	default:
		oauthErr(w, http.StatusBadRequest, "unsupported_grant_type", "")
		return
	}
	access, refresh := "at-"+random(), "rt-"+random()
	ng := *g
	ng.expires = time.Now().Add(s.opts.TokenTTL)
	s.access[access] = &ng
	s.refresh[refresh] = &ng
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": access, "token_type": "Bearer", "expires_in": int(s.opts.TokenTTL / time.Second),
		"refresh_token": refresh, "scope": strings.Join(g.scopes, " "),
	})
}
