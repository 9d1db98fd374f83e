package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/redact"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ClientOptions configure [Connect]. The zero value of every field means
// its documented default.
type ClientOptions struct {
	// Name and Version identify this client to the servers. Empty means
	// "codemode" and "dev".
	Name, Version string

	// Logger receives connection events, each stdio server's stderr (one
	// record per line) and dropped schemas. Nil discards them.
	Logger *slog.Logger

	// ConnectTimeout bounds each attempt to start a server: the process
	// or the connection, the handshake and the listing of its tools. Zero
	// means 30 seconds.
	ConnectTimeout time.Duration

	// Lenient makes Connect succeed when some servers cannot be reached:
	// it returns the ones that connected, logs each failure at error
	// level, lists the failed servers in [Upstreams.Unavailable] and
	// retries them in the background, backing off from one second to five
	// minutes; one that connects later is announced on
	// [Upstreams.Changed]. False (the default) means a failure of any
	// server fails Connect, as a batch job wants; a long-running host that
	// should not lose every server to one broken one sets it.
	Lenient bool

	// Background makes Connect return at once, before any server has
	// answered, for a host that should serve its clients while slow
	// servers start (npx downloads, a server that hangs until
	// ConnectTimeout): every server connects in the background, is listed
	// by [Upstreams.Unavailable] as connecting until it has connected or
	// failed, and [Upstreams.Changed] signals each of those moments. A
	// server that fails is retried as under Lenient, which Background
	// implies. False (the default) means Connect returns once every server
	// has connected or failed.
	Background bool

	// CallTimeout bounds one tool call: past it the call fails with a
	// ToolFailure the program can catch, and the server is told to cancel.
	// Zero means no bound other than the run's own deadline.
	CallTimeout time.Duration

	// MaxInlineBytes is the largest binary payload (image, audio, blob) a
	// result carries as base64; larger ones carry only their size. Zero
	// means DefaultMaxInlineBytes; negative means never.
	MaxInlineBytes int

	// ProtocolVersion is the version proposed in the handshake; a server
	// answers with the newest it speaks, down to 2024-11-05. Empty means
	// "2025-11-25", the newest version of the initialize handshake every
	// deployed server understands (the SDK's newer default first probes
	// with a request older servers have never seen).
	ProtocolVersion string

	// HTTPClient serves URL servers. Nil means a client without an overall
	// timeout, since an MCP stream stays open.
	HTTPClient *http.Client

	// Elicit, when set, answers a server's elicitation/create: a tool that
	// asks its user something while a program calls it. ctx is that of
	// the program's call in flight on that server (so it carries the
	// run's values, the session among them); server is the config's name
	// for it. A request that arrives while no call is in flight there, or
	// while calls of more than one session are, is declined, and logged:
	// nobody can tell whose user it is for. Nil means the servers are told
	// this client cannot ask anyone (no elicitation capability).
	// Server.AnswerElicitation puts the question to the MCP client whose
	// program made the call.
	Elicit func(ctx context.Context, server string, params *mcpsdk.ElicitParams) (*mcpsdk.ElicitResult, error)

	// TokenDir is where [Login] stores the OAuth tokens of URL servers
	// and Connect finds them. Empty means the tokens directory of
	// codemode's per-user configuration directory:
	// os.UserConfigDir()/codemode/tokens, or $CODEMODE_CONFIG_DIR/tokens.
	TokenDir string

	// LoginCommand is the command a person runs to authorize a server
	// that needs OAuth, for the messages that say so. Nil means
	// "codemode login NAME".
	LoginCommand func(server string) string
}

// Defaults for zero ClientOptions fields.
const (
	DefaultConnectTimeout  = 30 * time.Second
	DefaultProtocolVersion = "2025-11-25"
)

// Upstreams are connected MCP servers and the tools they offer. It is safe
// for concurrent use.
type Upstreams struct {
	opts  ClientOptions
	log   *slog.Logger
	conv  converter
	names []string // sorted
	ups   map[string]*upstream

	// ctx bounds background work (reconnects, refreshes); Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	changed chan struct{}

	// transport serves URL servers when ClientOptions.HTTPClient is nil;
	// it is ours, so Close can drop its idle connections.
	transport *http.Transport
}

// Connect starts or connects to every server of cfg, in parallel, lists
// their tools and returns them as one namespace per server (named by its
// config key). Close the Upstreams when done: it stops the stdio servers.
//
// By default Connect fails if any server cannot be reached, after stopping
// the ones that started; the error names each failed server and says why
// in terms a person can act on: a stdio server's exit status and last
// stderr lines, the timeout that ran out, the variable that is not set.
// With ClientOptions.Lenient it succeeds with the servers that connected
// and keeps trying the others in the background. Either way an invalid
// config, or ctx ending, fails it.
//
// A server that fails later (it crashes, or its connection drops) fails
// the calls in flight with a ToolFailure; the next call reconnects, and
// after a failed reconnect the following attempts back off from one
// second up to thirty.
func Connect(ctx context.Context, cfg *Config, opts ClientOptions) (*Upstreams, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if opts.Name == "" {
		opts.Name = "codemode"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.ProtocolVersion == "" {
		opts.ProtocolVersion = DefaultProtocolVersion
	}
	if opts.MaxInlineBytes == 0 {
		opts.MaxInlineBytes = DefaultMaxInlineBytes
	}
	if opts.Background {
		opts.Lenient = true
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	u := &Upstreams{
		opts:      opts,
		log:       logger,
		conv:      converter{maxInline: opts.MaxInlineBytes},
		ups:       map[string]*upstream{},
		changed:   make(chan struct{}, 1),
		transport: http.DefaultTransport.(*http.Transport).Clone(),
	}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	for name, sc := range cfg.Servers {
		if sc.Disabled {
			continue
		}
		if err := checkServerName(name); err != nil {
			u.cancel()
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
		if sc.problem == nil {
			if err := sc.check(); err != nil {
				u.cancel()
				return nil, fmt.Errorf("%w: server %q: %v", ErrInvalidConfig, name, err)
			}
		}
		u.names = append(u.names, name)
		u.ups[name] = newUpstream(u, name, sc)
	}
	sort.Strings(u.names)
	if opts.Background {
		for _, name := range u.names {
			up := u.ups[name]
			up.mu.Lock()
			up.dialing = make(chan struct{}) // calls and refreshes wait for this connect
			up.firstTry = true
			up.mu.Unlock()
			u.goBackground(up.connectFirst)
		}
		return u, nil
	}

	// Servers start in parallel: npx-launched ones take seconds each.
	errs := make([]error, len(u.names))
	var wg sync.WaitGroup
	for i, name := range u.names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = u.ups[name].connectNow(ctx)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		_ = u.Close()
		return nil, fmt.Errorf("mcp: connecting: %w", err)
	}
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("server %q: %w", u.names[i], err))
		}
	}
	if len(failed) > 0 && !opts.Lenient {
		_ = u.Close()
		return nil, fmt.Errorf("mcp: connecting: %w", errors.Join(failed...))
	}
	for i, err := range errs {
		if err != nil {
			u.ups[u.names[i]].startFailed(err)
		}
	}
	return u, nil
}

// Tools returns the current tool tree: one namespace per server. Each call
// returns a fresh snapshot, so a Runtime built from it keeps its tools
// while later listings change the Upstreams.
func (u *Upstreams) Tools() codemode.Tools {
	out := codemode.Tools{}
	for _, name := range u.names {
		out[name] = u.ups[name].snapshot()
	}
	return out
}

// Servers lists the configured server names, sorted.
func (u *Upstreams) Servers() []string { return append([]string(nil), u.names...) }

// Changed returns a channel that receives a value after a server's tool
// list changed (it announced notifications/tools/list_changed, or came back
// with different tools after a reconnect). Signals coalesce: the channel
// holds at most one, so a slow reader never misses the latest state. It
// is closed by Close.
func (u *Upstreams) Changed() <-chan struct{} { return u.changed }

// Refresh lists every server's tools again, connecting the ones that are
// down (ignoring their backoff). The error joins the servers that failed.
func (u *Upstreams) Refresh(ctx context.Context) error {
	var errs []error
	for _, name := range u.names {
		up := u.ups[name]
		if err := up.red().Error(up.refresh(ctx)); err != nil {
			errs = append(errs, fmt.Errorf("server %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Close disconnects every server and stops the stdio ones (closing their
// input, then SIGTERM, then SIGKILL), and waits for background work. Calls
// after Close fail. It always returns nil: shutdown problems are logged.
func (u *Upstreams) Close() error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	u.mu.Unlock()
	u.cancel()
	var wg sync.WaitGroup
	for _, up := range u.ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			up.close()
		}()
	}
	wg.Wait()
	u.wg.Wait()
	u.transport.CloseIdleConnections()
	u.mu.Lock()
	close(u.changed)
	u.mu.Unlock()
	return nil
}

// signal reports a tool-list change.
func (u *Upstreams) signal() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	select {
	case u.changed <- struct{}{}:
	default:
	}
}

// goBackground runs f unless the Upstreams are closing; Close waits for it.
func (u *Upstreams) goBackground(f func()) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return false
	}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		f()
	}()
	return true
}

// errClosed fails calls after Close. It is private: the program sees
// "Tool execution failed", which is all it needs at shutdown.
var errClosed = errors.New("mcp: upstreams closed")

// call performs one tool call for a program.
func (up *upstream) call(ctx context.Context, tool string, input json.RawMessage) (any, error) {
	res, err := up.callResult(ctx, tool, input)
	if err != nil {
		return nil, err
	}
	return up.u.conv.result(res, up.red())
}

// callResult makes a call and returns the server's result as it sent
// it, for call to convert or a direct tool to pass on. A JSON-RPC error
// (the server's answer: an unknown tool, invalid arguments) and a failed
// session are ToolErrors; the session is dropped so that the next call
// reconnects.
func (up *upstream) callResult(ctx context.Context, tool string, input json.RawMessage) (*mcpsdk.CallToolResult, error) {
	if err := checkArguments(input); err != nil {
		return nil, err
	}
	callCtx, cancel := withCallTimeout(ctx, up.u.opts.CallTimeout)
	defer cancel()
	defer up.track(callCtx)()
	cs, err := up.session(callCtx)
	if err != nil {
		return nil, timeoutOr(ctx, callCtx, err, fmt.Sprintf("the MCP server %q", up.name), up.u.opts.CallTimeout)
	}
	res, err := cs.CallTool(callCtx, &mcpsdk.CallToolParams{Name: tool, Arguments: input})
	if callCtx.Err() != nil && err != nil {
		return nil, timeoutOr(ctx, callCtx, err, fmt.Sprintf("the MCP server %q", up.name), up.u.opts.CallTimeout)
	}
	if err == nil {
		return res, nil
	}
	var login *LoginRequiredError
	if errors.As(err, &login) {
		// The request was refused, not the session broken: it stays, and
		// uses the new token once the login has stored it. (Checked
		// first: the SDK wraps it in a JSON-RPC "rejected by transport".)
		return nil, codemode.ToolErrorf("the MCP server %q refused the call: %v", up.name, login)
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return nil, toolError(rpcErr.Message, up.red())
	}
	// The transport failed: the process died, or the connection broke.
	// Drop the session so the next call reconnects.
	up.log.Warn("tool call failed; dropping the connection", "tool", tool, "error", err)
	up.drop(cs)
	return nil, codemode.ToolErrorf("the MCP server %q disconnected during the call; the next call reconnects", up.name)
}

// checkArguments refuses input that is not an object: MCP tool arguments
// are one.
func checkArguments(input json.RawMessage) error {
	if t := trimSpace(input); len(t) > 0 && t[0] != '{' {
		return codemode.ToolError("the input must be an object: MCP tool arguments are a JSON object")
	}
	return nil
}

// withCallTimeout bounds one call by the configured timeout, if any.
func withCallTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return ctx, func() {}
}

// answer sorts out a CallTool outcome: a result, or the server's own
// error (a JSON-RPC error is its answer, an unknown tool or invalid
// arguments, meant for the caller). answered is false when the session
// itself failed.
func answer(res *mcpsdk.CallToolResult, err error, conv converter, red *redact.Redactor) (v any, _ error, answered bool) {
	if err == nil {
		v, err := conv.result(res, red)
		return v, err, true
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return nil, toolError(rpcErr.Message, red), true
	}
	return nil, err, false
}

// timeoutOr turns the expiry of a call timeout into a ToolError the
// program can act on; when the run itself ended, err goes back unchanged
// (the run reports that).
func timeoutOr(runCtx, callCtx context.Context, err error, who string, timeout time.Duration) error {
	if runCtx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		return codemode.ToolErrorf("%s did not answer within %s", who, timeout)
	}
	return err
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
