package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/origin"
	"github.com/codemode-go/codemode/internal/redact"
	"github.com/codemode-go/codemode/internal/spoof"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
)

// upstream is one configured server and its connection state.
type upstream struct {
	u      *Upstreams
	name   string
	cfg    UpstreamConfig
	redp   atomic.Pointer[redact.Redactor] // the config's secrets and tokens, kept from the program and the log; see red
	log    *slog.Logger                    // redacts with red
	client *mcpsdk.Client
	oauth  *oauthClient // the stored OAuth token of a URL server; nil for others

	tokenMu sync.Mutex
	tokens  []string // OAuth tokens seen, redacted too

	mu       sync.Mutex
	sess     *mcpsdk.ClientSession   // nil while disconnected
	dialing  chan struct{}           // closed when the connect in progress ends
	failures int                     // consecutive failed connects
	retryAt  time.Time               // no automatic connect before this
	tools    codemode.Tools          // as last listed
	raw      map[string]*mcpsdk.Tool // the listed tools behind tools, by member name
	sig      string                  // fingerprint of the listing behind tools
	closed   bool
	arrived  bool  // it has connected at least once
	firstTry bool  // a background Connect's first attempt is under way
	lastErr  error // why the last connect failed (redacted), until it arrives

	refreshing, refreshAgain bool

	// calls are the contexts of the calls in flight, for elicitations
	// (ClientOptions.Elicit) to find whose they are.
	calls map[*context.Context]struct{}
}

func newUpstream(u *Upstreams, name string, sc UpstreamConfig) *upstream {
	up := &upstream{u: u, name: name, cfg: sc, tools: codemode.Tools{}}
	up.redp.Store(redact.New(sc.secrets()...))
	// Every record about this server goes through the redactor: the SDK's,
	// the stdio server's stderr and ours, which carry upstream errors.
	up.log = slog.New(redact.LiveHandler(u.log.Handler(), up.red)).With("server", name)
	up.oauth = up.newOAuthClient()
	copts := &mcpsdk.ClientOptions{
		Logger: up.log,
		// No roots or sampling: a program has none to offer, and
		// advertising roots makes some servers (filesystem) replace their
		// configured directories with the client's empty list. Elicitation
		// only when the host can put the question to a person.
		Capabilities: &mcpsdk.ClientCapabilities{},
		ToolListChangedHandler: func(_ context.Context, req *mcpsdk.ToolListChangedRequest) {
			up.listChanged(req.Session)
		},
	}
	if u.opts.Elicit != nil {
		copts.ElicitationHandler = up.elicit
	}
	up.client = mcpsdk.NewClient(&mcpsdk.Implementation{Name: u.opts.Name, Version: u.opts.Version}, copts)
	return up
}

// track records a call in flight until the returned func is called.
func (up *upstream) track(ctx context.Context) func() {
	key := &ctx
	up.mu.Lock()
	if up.calls == nil {
		up.calls = map[*context.Context]struct{}{}
	}
	up.calls[key] = struct{}{}
	up.mu.Unlock()
	return func() {
		up.mu.Lock()
		delete(up.calls, key)
		up.mu.Unlock()
	}
}

// elicit answers the server's elicitation/create through
// ClientOptions.Elicit, under the context of the program's call it
// belongs to. The protocol does not say which call that is; the calls in
// flight on this server do, when they are all one session's.
func (up *upstream) elicit(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
	up.mu.Lock()
	var ctx context.Context
	sessions := map[string]bool{}
	for c := range up.calls {
		if (*c).Err() != nil {
			continue
		}
		name, _ := codemode.SessionFrom(*c)
		sessions[name] = true
		ctx = *c
	}
	up.mu.Unlock()
	switch {
	case ctx == nil:
		up.log.Warn("the server asked its user something while no program was calling it; declined", "message", req.Params.Message)
		return &mcpsdk.ElicitResult{Action: "decline"}, nil
	case len(sessions) > 1:
		up.log.Warn("the server asked its user something while programs of several sessions were calling it, so whose user is not known; declined", "message", req.Params.Message)
		return &mcpsdk.ElicitResult{Action: "decline"}, nil
	}
	return up.u.opts.Elicit(ctx, up.name, req.Params)
}

// red is the redactor of the server's secrets: the config's, and the
// OAuth tokens seen so far.
func (up *upstream) red() *redact.Redactor { return up.redp.Load() }

// maxTokenSecrets bounds the OAuth tokens kept for redaction: the
// current ones, and enough older ones that a token refreshed a moment ago
// is still redacted where a response echoes it.
const maxTokenSecrets = 16

// addTokenSecrets adds a token's access and refresh tokens to the
// redactor.
func (up *upstream) addTokenSecrets(tok *oauth2.Token) {
	if tok == nil {
		return
	}
	up.tokenMu.Lock()
	defer up.tokenMu.Unlock()
	added := false
	for _, s := range []string{tok.AccessToken, tok.RefreshToken} {
		if s != "" && !slices.Contains(up.tokens, s) {
			up.tokens = append(up.tokens, s)
			added = true
		}
	}
	if !added {
		return
	}
	if n := len(up.tokens); n > maxTokenSecrets {
		up.tokens = slices.Clone(up.tokens[n-maxTokenSecrets:])
	}
	up.redp.Store(redact.New(append(up.cfg.secrets(), up.tokens...)...))
}

// loggedIn reports whether a login stored a new token since the server
// was last tried: it need not wait out its backoff.
func (up *upstream) loggedIn() bool { return up.oauth.changed() }

// snapshot copies the namespace, so callers cannot change ours.
func (up *upstream) snapshot() codemode.Tools {
	up.mu.Lock()
	defer up.mu.Unlock()
	out := make(codemode.Tools, len(up.tools))
	for k, v := range up.tools {
		out[k] = v
	}
	return out
}

// session returns the live session, connecting when there is none: one
// connect at a time, shared by every caller waiting for it, and none
// before the backoff since the last failure has passed.
func (up *upstream) session(ctx context.Context) (*mcpsdk.ClientSession, error) {
	for {
		up.mu.Lock()
		switch {
		case up.closed:
			up.mu.Unlock()
			return nil, errClosed
		case up.sess != nil:
			cs := up.sess
			up.mu.Unlock()
			return cs, nil
		case up.cfg.problem != nil:
			up.mu.Unlock()
			return nil, codemode.ToolErrorf("the MCP server %q is unavailable: %v", up.name, up.cfg.problem)
		case up.dialing == nil:
			if wait := time.Until(up.retryAt); wait > 0 && !up.loggedIn() {
				up.mu.Unlock()
				return nil, codemode.ToolErrorf("the MCP server %q is unavailable: it failed to start or connect; the next attempt is in %s",
					up.name, wait.Round(100*time.Millisecond))
			}
			ch := make(chan struct{})
			if !up.u.goBackground(func() { up.redial(ch) }) {
				up.mu.Unlock()
				return nil, errClosed
			}
			up.dialing = ch
		}
		ch := up.dialing
		up.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// redial connects in the background: a run that gives up waiting must
// not kill a server that is halfway through starting.
func (up *upstream) redial(done chan struct{}) {
	defer close(done)
	cs, tools, raw, sig, err := up.connect(up.u.ctx)
	up.mu.Lock()
	up.dialing = nil
	if err != nil && up.u.ctx.Err() != nil {
		up.mu.Unlock()
		return // shutting down: not the server's failure
	}
	if err != nil {
		err = up.red().Error(err)
		up.failures++
		ceiling := maxReconnectBackoff
		if !up.arrived {
			ceiling = maxStartBackoff
		}
		up.retryAt = time.Now().Add(retryDelay(up.failures, ceiling))
		attempts, next := up.failures, time.Until(up.retryAt).Round(time.Second)
		// A server that never started says the same thing at every
		// attempt: say it again only when it changes.
		same := !up.arrived && up.lastErr != nil && up.brief(up.lastErr) == up.brief(err)
		up.lastErr = err
		arrived := up.arrived
		up.mu.Unlock()
		switch {
		case arrived:
			up.log.Warn("reconnect failed", "error", err, "attempts", attempts, "next_attempt_in", next)
		case same:
			up.log.Debug("still unavailable", "error", err, "attempts", attempts, "next_attempt_in", next)
		default:
			up.log.Warn("still unavailable", "error", err, "attempts", attempts, "next_attempt_in", next)
		}
		return
	}
	if up.closed {
		up.mu.Unlock()
		_ = cs.Close()
		return
	}
	late := !up.arrived
	up.failures, up.retryAt = 0, time.Time{}
	up.arrived, up.lastErr = true, nil
	up.sess, up.tools, up.raw = cs, tools, raw
	changed := sig != up.sig
	up.sig = sig
	up.mu.Unlock()
	if late {
		up.log.Info("the server is available now", "tools", len(tools))
	} else {
		up.log.Info("reconnected")
	}
	if changed {
		up.u.signal()
	}
}

// connect opens a session and lists its tools. A failure is explained,
// not redacted.
func (up *upstream) connect(parent context.Context) (*mcpsdk.ClientSession, codemode.Tools, map[string]*mcpsdk.Tool, string, error) {
	ctx, cancel := context.WithTimeout(parent, up.u.opts.ConnectTimeout)
	defer cancel()
	// The transport outlives the handshake: an HTTP+SSE stream is bound to
	// the context it was opened with. It gets a context of its own, ended
	// by Close, by the session ending, or by a handshake that fails.
	life, endLife := context.WithCancel(up.u.ctx)
	var connected atomic.Bool
	context.AfterFunc(ctx, func() {
		if !connected.Load() {
			endLife()
		}
	})
	start := time.Now()
	cs, transport, proc, err := up.open(ctx, life)
	if err != nil {
		endLife()
		return nil, nil, nil, "", up.startFailure(parent, ctx, proc, "completing the MCP handshake", err)
	}
	list, err := listTools(ctx, cs, up.log)
	if err != nil {
		up.closeSession(cs)
		endLife()
		return nil, nil, nil, "", up.startFailure(parent, ctx, proc, "listing its tools", fmt.Errorf("listing tools: %w", err))
	}
	connected.Store(true)
	tools, raw, sig := up.toolset().namespace(list)
	// Watch the session: when the process exits or the stream ends, forget
	// it so the next call reconnects instead of failing on a dead pipe.
	if !up.u.goBackground(func() {
		_ = cs.Wait()
		endLife()
		up.drop(cs)
	}) {
		endLife()
	}
	ir := cs.InitializeResult()
	version := ""
	if ir != nil {
		version = ir.ProtocolVersion
	}
	up.log.Info("connected", "transport", transport, "protocol", version, "tools", len(tools), "took", time.Since(start).Round(time.Millisecond))
	return cs, tools, raw, sig, nil
}

// lifetime connects a transport with its own context rather than the
// handshake's.
type lifetime struct {
	mcpsdk.Transport
	ctx context.Context
}

func (l lifetime) Connect(context.Context) (mcpsdk.Connection, error) {
	return l.Transport.Connect(l.ctx)
}

// open connects the transport (for the lifetime of life) and performs the
// handshake (within ctx). It returns the transport type used and, for a
// stdio server, its process.
func (up *upstream) open(ctx, life context.Context) (*mcpsdk.ClientSession, string, *process, error) {
	opts := &mcpsdk.ClientSessionOptions{ProtocolVersion: up.u.opts.ProtocolVersion}
	dial := func(t mcpsdk.Transport) (*mcpsdk.ClientSession, error) {
		return up.client.Connect(ctx, lifetime{t, life}, opts)
	}
	switch kind := up.cfg.transport(); kind {
	case TypeStdio:
		p := up.process()
		cs, err := dial(p)
		return cs, kind, p, err
	case TypeSSE:
		cs, err := dial(&mcpsdk.SSEClientTransport{Endpoint: up.cfg.URL, HTTPClient: up.httpClient()})
		return cs, kind, nil, err
	}
	st := &mcpsdk.StreamableClientTransport{Endpoint: up.cfg.URL, HTTPClient: up.httpClient()}
	if up.oauth != nil {
		st.OAuthHandler = up.oauth
	}
	cs, err := dial(st)
	if err == nil || up.cfg.Type == TypeHTTP || ctx.Err() != nil || errors.As(err, new(*LoginRequiredError)) {
		// A server that asks for OAuth speaks streamable HTTP: HTTP+SSE
		// would only be refused too, and its error would hide this one.
		return cs, TypeHTTP, nil, err
	}
	// The type was inferred from the URL: the server may predate
	// streamable HTTP and speak the 2024-11-05 HTTP+SSE transport.
	cs2, err2 := dial(&mcpsdk.SSEClientTransport{Endpoint: up.cfg.URL, HTTPClient: up.httpClient()})
	if err2 == nil {
		up.log.Info("the server does not speak streamable HTTP; using HTTP+SSE", "streamable_error", err)
		return cs2, TypeSSE, nil, nil
	}
	return nil, "", nil, fmt.Errorf("streamable HTTP: %w (and HTTP+SSE: %v)", err, err2)
}

// httpClient is the client for a URL server: a copy of the host's, or
// ours, that sends the configured headers to the configured origin only
// and refuses to be redirected to another origin.
//
// Refusing is safer than following without the headers, and fails more
// clearly. The headers are the credential: followed with them, a redirect
// hands it to whoever the Location names (Go's policy of dropping
// Authorization for another host cannot help, since the headers are added
// below the client, on every hop); followed without them, a server that
// moved answers 401 and the host chases a credential problem that is
// really a moved URL. A 307 or 308 would also
// carry the JSON-RPC request, tool arguments included, to the new origin.
// Servers rarely move across origins, and then the fix is to configure
// the new URL, which the error names. Redirects within the origin
// ("/mcp" → "/mcp/") are followed, with the headers.
func (up *upstream) httpClient() *http.Client {
	base := up.u.opts.HTTPClient
	if base == nil {
		base = &http.Client{Transport: up.u.transport}
	}
	c := *base                       // a copy: the host's client is not changed
	home, _ := url.Parse(up.cfg.URL) // checked by UpstreamConfig.check
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !origin.Same(req.URL, home) {
			return fmt.Errorf("the server redirected to another origin, %s://%s, which is not followed so that the configured headers and requests go nowhere else; configure that URL if the server moved", req.URL.Scheme, req.URL.Host)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	if len(up.cfg.Headers) > 0 {
		rt := c.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		c.Transport = headerTransport{base: rt, headers: up.cfg.Headers, home: home}
	}
	return &c
}

// headerTransport adds the configured headers to requests for the
// configured origin. Redirects are not the only way off it: an HTTP+SSE
// server names the URL the client posts to, and may name another origin.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	home    *url.URL
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !origin.Same(req.URL, t.home) {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// maxPages bounds a tools/list cursor loop against a server whose cursors
// never end.
const maxPages = 1000

// listTools fetches every page of a session's tools.
func listTools(ctx context.Context, cs *mcpsdk.ClientSession, log *slog.Logger) ([]*mcpsdk.Tool, error) {
	if ir := cs.InitializeResult(); ir != nil && ir.Capabilities != nil && ir.Capabilities.Tools == nil {
		log.Info("the server offers no tools")
		return nil, nil
	}
	var all []*mcpsdk.Tool
	seen := map[string]bool{}
	params := &mcpsdk.ListToolsParams{}
	for page := 0; ; page++ {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		all = append(all, res.Tools...)
		next := res.NextCursor
		if next == "" {
			return all, nil
		}
		if seen[next] || page+1 >= maxPages {
			log.Warn("tools/list pagination does not end; keeping the pages read", "pages", page+1)
			return all, nil
		}
		seen[next] = true
		params = &mcpsdk.ListToolsParams{Cursor: next}
	}
}

// toolset turns a server's listing into codemode tools.
type toolset struct {
	log     *slog.Logger
	allowed func(tool string) bool
	// call performs a call of the named tool.
	call func(ctx context.Context, tool string, input json.RawMessage) (any, error)
}

// namespace builds the codemode tools of a listing, the listed tools
// they were made from (by member name), and the listing's fingerprint.
func (ts toolset) namespace(list []*mcpsdk.Tool) (codemode.Tools, map[string]*mcpsdk.Tool, string) {
	ns := codemode.Tools{}
	raw := map[string]*mcpsdk.Tool{}
	sig, _ := json.Marshal(list)
	for _, t := range list {
		if t == nil {
			continue
		}
		if t.Name == "" {
			ts.log.Warn("skipping a tool without a name")
			continue
		}
		if !ts.allowed(t.Name) {
			continue
		}
		if i, j := spoof.Find(t.Name); i >= 0 {
			// A name with a character that does not show as itself would
			// read as another name, or as a tool's beside it. Renaming
			// it visibly would still offer a tool under a name its server
			// chose to deceive with; skipping it keeps the rest usable.
			ts.log.Warn("skipping a tool: its name holds characters that do not show as themselves",
				"tool", spoof.Escape(t.Name), "characters", spoof.Runes(t.Name[i:j]))
			continue
		}
		member := codemode.SafeName(t.Name)
		if member != t.Name {
			// A name programs cannot use (then, toJSON, ...): expose the
			// tool beside it.
			ts.log.Warn("tool renamed: its name is reserved in programs", "tool", t.Name, "as", member)
		}
		if _, dup := ns[member]; dup {
			ts.log.Warn("skipping a duplicate tool name", "tool", t.Name)
			continue
		}
		ns[member] = ts.tool(t)
		raw[member] = t
	}
	return ns, raw, string(sig)
}

// tool adapts one MCP tool. A schema that cannot be used is dropped (and
// logged) rather than losing the tool: the server validates the arguments
// anyway, so the program only loses the signature's detail.
func (ts toolset) tool(t *mcpsdk.Tool) codemode.Tool {
	in, err := convertSchema(t.InputSchema, true)
	if err != nil {
		ts.log.Warn("dropping the input schema", "tool", t.Name, "error", err)
		in = nil
	}
	out, err := convertSchema(t.OutputSchema, false)
	if err != nil {
		ts.log.Warn("dropping the output schema", "tool", t.Name, "error", err)
		out = nil
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	name := t.Name
	return codemode.Tool{
		Description:         desc,
		Input:               in,
		Output:              out,
		Annotations:         annotations(t.Annotations),
		SkipInputValidation: true,
		Run: func(ctx context.Context, input json.RawMessage) (any, error) {
			return ts.call(ctx, name, input)
		},
	}
}

// annotations maps an upstream tool's MCP annotations, with the defaults
// the MCP specification gives hints left out: a tool that is not read-only
// is destructive, and every tool reaches an open world, unless it says
// otherwise. A tool without annotations has none. A tool that says it is
// read-only and, explicitly, destructive is taken as destructive: the
// hints are an untrusted server's, and of two that disagree the one that
// asks for more care is the one to believe.
func annotations(a *mcpsdk.ToolAnnotations) *codemode.Annotations {
	if a == nil {
		return nil
	}
	destructive := a.DestructiveHint == nil && !a.ReadOnlyHint || a.DestructiveHint != nil && *a.DestructiveHint
	return &codemode.Annotations{
		ReadOnly:    a.ReadOnlyHint && !destructive,
		Destructive: destructive,
		Idempotent:  a.IdempotentHint,
		OpenWorld:   a.OpenWorldHint == nil || *a.OpenWorldHint,
	}
}

// toolset is the upstream's: calls go through its session (reconnecting),
// and errors only the host sees are redacted too (OnToolCallEnd may log
// them; the tool errors are redacted already).
func (up *upstream) toolset() toolset {
	return toolset{log: up.log, allowed: up.cfg.allowed, call: func(ctx context.Context, tool string, input json.RawMessage) (any, error) {
		v, err := up.call(ctx, tool, input)
		return v, up.red().Error(err)
	}}
}

// drop forgets a session that failed or ended, and closes it.
func (up *upstream) drop(cs *mcpsdk.ClientSession) {
	up.mu.Lock()
	current := up.sess == cs
	if current {
		up.sess = nil
	}
	closed := up.closed
	up.mu.Unlock()
	if current && !closed {
		up.log.Warn("disconnected; the next call reconnects")
	}
	if current && !up.u.goBackground(func() { up.closeSession(cs) }) {
		up.closeSession(cs) // shutting down: close it here, nobody else will
	}
}

// closeSession closes a session, logging what a stdio server's exit says.
func (up *upstream) closeSession(cs *mcpsdk.ClientSession) {
	if err := cs.Close(); err != nil && !errors.Is(err, mcpsdk.ErrConnectionClosed) {
		up.log.Debug("session closed", "error", err)
	}
}

// listChanged handles notifications/tools/list_changed: list again in the
// background (the notification arrives on the session's reader, which the
// listing itself needs), coalescing bursts into one more listing.
func (up *upstream) listChanged(cs *mcpsdk.ClientSession) {
	up.mu.Lock()
	if up.sess != cs || up.closed {
		up.mu.Unlock()
		return
	}
	if up.refreshing {
		up.refreshAgain = true
		up.mu.Unlock()
		return
	}
	up.refreshing = true
	up.mu.Unlock()
	started := up.u.goBackground(func() {
		for {
			ctx, cancel := context.WithTimeout(up.u.ctx, up.u.opts.ConnectTimeout)
			err := up.relist(ctx, cs)
			cancel()
			if err != nil {
				up.log.Warn("listing tools after list_changed failed", "error", err)
			}
			up.mu.Lock()
			if !up.refreshAgain {
				up.refreshing = false
				up.mu.Unlock()
				return
			}
			up.refreshAgain = false
			up.mu.Unlock()
		}
	})
	if !started {
		up.mu.Lock()
		up.refreshing = false
		up.mu.Unlock()
	}
}

// relist lists the tools of cs again and publishes a change.
func (up *upstream) relist(ctx context.Context, cs *mcpsdk.ClientSession) error {
	list, err := listTools(ctx, cs, up.log)
	if err != nil {
		return err
	}
	tools, raw, sig := up.toolset().namespace(list)
	up.mu.Lock()
	if up.sess != cs || up.closed || sig == up.sig {
		up.mu.Unlock()
		return nil
	}
	up.tools, up.raw, up.sig = tools, raw, sig
	up.mu.Unlock()
	up.log.Info("tool list changed", "tools", len(tools))
	up.u.signal()
	return nil
}

// refresh serves Upstreams.Refresh.
func (up *upstream) refresh(ctx context.Context) error {
	up.mu.Lock()
	cs := up.sess
	if cs == nil {
		up.retryAt = time.Time{} // an explicit refresh skips the backoff
	}
	up.mu.Unlock()
	if cs == nil {
		_, err := up.session(ctx)
		return err
	}
	return up.relist(ctx, cs)
}

// close ends the session for good.
func (up *upstream) close() {
	up.mu.Lock()
	up.closed = true
	cs := up.sess
	up.sess = nil
	up.mu.Unlock()
	if cs != nil {
		up.closeSession(cs)
	}
}
