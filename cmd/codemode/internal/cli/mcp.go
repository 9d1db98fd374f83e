package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/codemode-go/codemode/store"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/console"
	"github.com/codemode-go/codemode/mcp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const mcpUsage = `Usage: codemode mcp [flags]

Serves one MCP tool, execute, whose programs call the tools of the MCP
servers in --config (one namespace per server) and of the other sources.
It speaks MCP on standard input and output, or streamable HTTP at
http://ADDR/mcp with --http. Logs go to standard error.

Over HTTP anyone who reaches the port can run programs against every
configured tool, so by default --http binds only loopback addresses
(127.0.0.0/8, ::1, localhost) and, without a token, refuses requests
whose Host is not the loopback address and port it listens on, or whose
Origin is not a loopback origin (DNS rebinding). Any other address
(":8080" and "0.0.0.0:8080" bind every interface) needs
--http-allow-remote and a bearer token, read from the environment
variable --http-token-env names so it is not on the command line; with a
token, on loopback too, every request must carry "Authorization: Bearer
TOKEN" (401 otherwise). The server speaks plain HTTP: off loopback, put
TLS in front of it. At most --http-max-sessions
sessions are open at once: a new one takes the place of the least
recently used idle one (503 only when every session is busy); a session
idle for --http-idle-timeout is closed (one never used after its
initialize after a minute), and at most --max-runs programs run at once
over all sessions (more wait their turn, shared fairly among sessions).

The server answers its clients at once, while the --config servers
start: the execute description names the ones still connecting, and a
program that calls one waits for it (at most 30s). A server that cannot
start (a wrong command, one that exits or hangs, a variable its entry
needs that is not set) does not stop the others: it is logged at error
level with the reason, the execute description tells the model it is
unavailable, and it is retried in the background. Whenever a server
arrives, clients are sent tools/list_changed. --require-all waits for
every server before serving, and makes any failure fatal instead.

When the engine cannot start (a $CODEMODE_ENGINE_WASM that is not the
pinned build, say), codemode mcp exits with the reason: --fallback none,
the default. With --fallback direct it logs a warning with the reason
and serves each tool as an MCP tool of its own instead, named
server__tool, without code mode: calls go to the servers one at a time
and their results come back as the servers sent them. Tools --policy
would deny or ask about are not served, since there is no run to hold
while someone decides; --openapi operations whose input schema refers
to shared types are left out, logged.

Exit status: 0 after a normal shutdown (end of input, SIGINT or SIGTERM),
1 when the listener or the engine cannot start (without --fallback
direct; or a server, under --require-all) or standard input or output
fails (a line that is not a JSON-RPC message only gets an error reply),
2 for usage errors (bad flags, a bad config file, or an address the
flags do not allow).
`

// mcpCmd runs "codemode mcp" until the client disconnects or a signal
// (SIGINT, SIGTERM) asks it to stop.
func mcpCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runMCP(ctx, args, stdin, stdout, stderr)
}

// mcpFlags are the flags of "codemode mcp".
type mcpFlags struct {
	runtime  runtimeFlags
	sources  sourceFlags
	httpAddr string

	maxRuns         int
	httpAllowRemote bool
	httpTokenEnv    string
	httpMaxSessions int
	httpIdleTimeout duration
	cells           bool
	sessionState    bool
	richContent     bool
	maxQueuedRuns   int
	runWait         duration
	repl            bool
	replMaxState    byteSize
	fallback        string // none or direct: what to serve when the engine cannot start

	cluster *clusterFlags // codemode serve: the front of a cluster
}

// defaultMaxRuns is --max-runs' default: runs are mostly CPU-bound while
// they compute, so a few more than the cores keeps them busy while some
// wait on tools, without letting a burst of calls take every core and an
// engine's memory each.
func defaultMaxRuns() int { return 2 * runtime.GOMAXPROCS(0) }

func (f *mcpFlags) register(fs *flag.FlagSet) {
	f.sources.register(fs, true, "info")
	f.runtime.registerLimits(fs)
	f.runtime.registerRun(fs)
	f.runtime.registerCatalog(fs)
	f.runtime.registerEngine(fs)
	fs.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP at ADDR (host:port, loopback unless --http-allow-remote; path /mcp) instead of standard input/output")
	fs.IntVar(&f.maxRuns, "max-runs", defaultMaxRuns(), "most programs running at once over all sessions, by default twice GOMAXPROCS, plus max(1, N/4) for sessions whose programs end quickly; more wait for a slot (0 = no limit)")
	fs.IntVar(&f.maxQueuedRuns, "max-queued-runs", mcp.DefaultMaxQueuedRuns, "most execute calls of one session waiting for a run slot; one more fails at once (0 = no limit)")
	fs.Var(&f.runWait, "run-wait", "the longest an execute call waits for a run slot before it fails, a `duration` (default 30s, or --timeout if shorter; 0 = as long as its request lasts)")
	fs.BoolVar(&f.httpAllowRemote, "http-allow-remote", false, "let --http bind a non-loopback address (needs --http-token-env)")
	fs.StringVar(&f.httpTokenEnv, "http-token-env", "", "require the bearer token held in environment variable `NAME` on every HTTP request (at least 16 bytes)")
	fs.IntVar(&f.httpMaxSessions, "http-max-sessions", mcp.DefaultMaxSessions, "most HTTP sessions open at once; a new one closes the least recently used idle one, and is refused with 503 only when every session is busy (0 = no limit)")
	f.httpIdleTimeout = duration(mcp.DefaultSessionIdleTimeout)
	fs.Var(&f.httpIdleTimeout, "http-idle-timeout", "close an HTTP session after this long without a request, a `duration` (0 = never)")
	fs.BoolVar(&f.cells, "cells", false, "let runs outlive their execute call: execute takes yieldMs, and a wait tool collects the rest")
	fs.BoolVar(&f.repl, "repl", false, "make each client session a REPL session: top-level declarations of one execute stay defined for the next, and a program's value is its last expression's")
	f.replMaxState = 8 << 20
	fs.Var(&f.replMaxState, "repl-max-state", "the largest heap a --repl session keeps between calls, a `size` (a cell that leaves more is not kept)")
	fs.BoolVar(&f.richContent, "rich-content", true, "pass images, audio and resources a program returns (objects shaped as MCP content, e.g. from a tool) to the client as content")
	fs.BoolVar(&f.sessionState, "session-state", false, "give programs tools.$codemode.store, load and keys: JSON values kept in memory per client session, from one run to the next")
	if f.cluster == nil {
		fs.StringVar(&f.fallback, "fallback", fallbackNone, "what to serve when the engine cannot start: `MODE` none (exit with the error) or direct (serve each tool as an MCP tool of its own, without code mode; tools --policy does not plainly allow are left out)")
	}
}

// The values of --fallback.
const (
	fallbackNone   = "none"
	fallbackDirect = "direct"
)

// httpSettings checks the HTTP flags together and returns the bearer
// token (empty for none) and whether the address is loopback. The message
// of an error says what to change.
func (f *mcpFlags) httpSettings(fs *flag.FlagSet) (token string, loopback bool, err error) {
	if f.httpAddr == "" {
		var set []string
		fs.Visit(func(fl *flag.Flag) {
			if strings.HasPrefix(fl.Name, "http-") {
				set = append(set, "--"+fl.Name)
			}
		})
		if len(set) > 0 {
			return "", false, fmt.Errorf("%s apply only with --http", strings.Join(set, ", "))
		}
		return "", false, nil
	}
	if f.httpMaxSessions < 0 {
		return "", false, errors.New("--http-max-sessions must not be negative")
	}
	loopback, err = loopbackBind(f.httpAddr)
	if err != nil {
		return "", false, fmt.Errorf("--http %q: want host:port, such as 127.0.0.1:8080 (%v)", f.httpAddr, err)
	}
	if f.httpTokenEnv != "" {
		token = os.Getenv(f.httpTokenEnv)
		if token == "" {
			return "", false, fmt.Errorf("--http-token-env: the environment variable %s is empty or unset", f.httpTokenEnv)
		}
		if len(token) < minTokenBytes {
			return "", false, fmt.Errorf("--http-token-env: the token in %s is shorter than %d bytes; make one with: openssl rand -hex 32", f.httpTokenEnv, minTokenBytes)
		}
	}
	if !loopback {
		if !f.httpAllowRemote || token == "" {
			return "", false, fmt.Errorf("--http %q is not a loopback address, so other hosts could run programs against every tool; "+
				"bind 127.0.0.1 or [::1], or pass --http-allow-remote with --http-token-env NAME", f.httpAddr)
		}
	}
	return token, loopback, nil
}

// runMCP is mcpCmd with the stopping context given, for tests.
func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runMCPAs(ctx, "mcp", args, stdin, stdout, stderr)
}

// runMCPAs is codemode mcp, or codemode serve (name "serve"): the same
// server, whose programs run on the cluster's workers.
func runMCPAs(ctx context.Context, name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	usage := mcpUsage
	var f mcpFlags
	if name == "serve" {
		usage = serveUsage
		f.cluster = &clusterFlags{}
	}
	fs := newFlagSet(name, usage, stderr)
	f.register(fs)
	if f.cluster != nil {
		f.cluster.register(fs, true)
	}
	rest, err := parseArgs(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(rest) != 0 {
		return usageFailed(stderr, "codemode mcp", "unexpected arguments %q", rest)
	}
	logger, err := f.sources.logger(stderr, true)
	if err != nil {
		fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
		return exitUsage
	}
	if err := f.runtime.check(); err != nil {
		return usageFailed(stderr, "codemode mcp", "%v", err)
	}
	for _, c := range []struct {
		name     string
		negative bool
	}{{"--max-runs", f.maxRuns < 0}, {"--max-queued-runs", f.maxQueuedRuns < 0}, {"--run-wait", f.runWait < 0}} {
		if c.negative {
			fmt.Fprintf(stderr, "codemode mcp: %s must not be negative\n", c.name)
			return exitUsage
		}
	}
	if f.repl && (f.cells || f.cluster != nil) {
		return usageFailed(stderr, "codemode "+name, "--repl keeps each session's heap in this process: it works neither with --cells nor in codemode serve")
	}
	if f.repl && f.replMaxState < 64<<10 {
		return usageFailed(stderr, "codemode "+name, "--repl-max-state %s is under 64 KiB, less than an empty session takes", humanBytes(int64(f.replMaxState)))
	}
	if f.cluster == nil && f.fallback != fallbackNone && f.fallback != fallbackDirect {
		return usageFailed(stderr, "codemode mcp", "--fallback %q: want none or direct", f.fallback)
	}
	token, loopback, err := f.httpSettings(fs)
	if err != nil {
		fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
		return exitUsage
	}
	// The go-sdk's per-session records go to debug (see quietSDK).
	logger = slog.New(quietSDK{logger.Handler()})

	// The servers connect in the background: the client gets its
	// initialize answer now, and each server's tools when it arrives.
	// The servers' questions reach this server's clients. Not in a
	// cluster's front: the runs, and so the calls, are the workers', whose
	// servers must see the same client (the tool lists depend on it).
	f.sources.askUsers = f.cluster == nil
	src, err := f.sources.open(ctx, logger, true)
	if err != nil {
		fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
		return exitFor(err)
	}
	if src.up == nil && len(src.fixed) == 0 {
		logger.Warn("no tools: give --config (or another tool source); programs can only compute")
	}
	tel := startTelemetry(func(format string, args ...any) { logger.Warn(fmt.Sprintf(format, args...)) })
	defer tel.shutdown() // after the runs: srv.Close below waits for them
	runtimeOpts := f.runtime.options(nil)
	runtimeOpts.RichContent = f.richContent
	if f.repl {
		runtimeOpts.MaxStateBytes = int64(f.replMaxState)
	}
	if f.sessionState {
		runtimeOpts.Values = store.NewMemoryValues(0, 0)
	}
	tel.configure(&runtimeOpts)
	var exec mcp.Executor
	var node *member
	if f.cluster != nil {
		node, err = f.cluster.join(ctx, false, f.cluster.worker, withTools(runtimeOpts, src.tools()), logger)
		if err != nil {
			src.close()
			fmt.Fprintf(stderr, "codemode %s: %v\n", name, err)
			if errors.As(err, new(usageError)) {
				return exitUsage
			}
			return exitFailure
		}
		defer node.close() // after srv.Close: runs first
		exec = node.node
		if err := publishManifest(ctx, node.node, &f.sources, f.cluster.keyFile, logger); err != nil {
			logger.Warn("the tool manifest was not published: workers need the same tool flags as this front", "error", err)
		}
		if f.sessionState {
			runtimeOpts.Values = node.node.Values(0, 0)
		}
	}
	srv, err := mcp.NewServer(mcp.ServerOptions{
		Executor:           exec,
		Version:            version(),
		Runtime:            runtimeOpts,
		Logger:             logger,
		MaxRuns:            f.maxRuns,
		MaxQueuedRuns:      noneIfZero(f.maxQueuedRuns),
		RunWait:            runWaitOption(fs, time.Duration(f.runWait)),
		MaxSessions:        noneIfZero(f.httpMaxSessions),
		SessionIdleTimeout: noneIfZero(time.Duration(f.httpIdleTimeout)),
		Cells:              f.cells,
		REPL:               f.repl,
	})
	if err == nil {
		src.asker.Store(srv)
		err = srv.SetTools(src.tools(), src.unavailable()...)
	}
	if err != nil && f.fallback == fallbackDirect && engineDown(runtimeOpts) {
		return serveDirect(ctx, &f, err, src, token, loopback, logger, stdin, stdout, stderr)
	}
	if err != nil {
		src.close()
		// Bad options are a usage error; a missing engine is not.
		return newFailed(err, stderr)
	}
	if f.runtime.rules != nil {
		for _, p := range f.runtime.rules.Unmatched(srv.Runtime()) {
			logger.Warn("a --policy rule matches no tool (yet: servers that start later may add some)", "rule", p)
		}
	}

	// Follow the servers: a tool list that changed, or a server that
	// started late, changes the execute description, which the server
	// announces to its clients with tools/list_changed.
	var follow sync.WaitGroup
	if ch := src.changed(); ch != nil {
		follow.Add(1)
		go func() {
			defer follow.Done()
			for range ch {
				node.setTools(src.tools(), logger)
				if err := srv.SetTools(src.tools(), src.unavailable()...); err != nil && !errors.Is(err, mcp.ErrServerClosed) {
					logger.Error("the new tool list was refused; keeping the old one", "error", err)
				}
			}
		}()
	}

	var code int
	if f.httpAddr != "" {
		hc := httpConfig{addr: f.httpAddr, token: token, loopback: loopback}
		if node != nil && f.cluster.console {
			con, err := console.New(console.Options{Node: node.node, Runtime: srv.Runtime, Token: token,
				TraceURL: f.cluster.traceURL, Logger: logger.With("part", "console")})
			if err != nil {
				_ = srv.Close()
				src.close()
				return newFailed(err, stderr)
			}
			defer con.Close()
			hc.console = con
		}
		code = serveHTTP(ctx, hc, srv, logger, stderr)
	} else {
		if node != nil && f.cluster.console {
			logger.Info("the console is served over HTTP: give --http 127.0.0.1:PORT to open it at http://127.0.0.1:PORT/console/")
		}
		code = serveStdio(ctx, srv, stdin, stdout, logger)
	}
	// Runs first (they may still call upstream tools), then the servers;
	// closing them closes the change channel, which ends the follower.
	_ = srv.Close()
	node.close() // its worker may run other fronts' programs: before the tools go
	src.close()
	follow.Wait()
	return code
}

// mcpServer is what serveStdio and serveHTTP serve: an *mcp.Server, or
// the *mcp.DirectServer of --fallback direct.
type mcpServer interface {
	MCP() *mcpsdk.Server
	HTTPHandler() http.Handler
}

func serveStdio(ctx context.Context, srv mcpServer, stdin io.Reader, stdout io.Writer, logger *slog.Logger) int {
	// Closing the reader is what unblocks a pending read at shutdown, so
	// keep stdin's Close when it has one.
	rc, ok := stdin.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(stdin)
	}
	in := &eofReader{ReadCloser: rc}
	logger.Info("serving MCP on standard input/output")
	// mcp.StdioTransport answers a line that is not a JSON-RPC message
	// with a JSON-RPC error and goes on; the SDK's own transport would end
	// the session there. So an error here is fatal (standard input or
	// output failed), and the exit status says so; the end of input is not
	// an error, nor is a write that fails once the client has closed its
	// end (a notification racing the client's exit).
	err := srv.MCP().Run(ctx, mcp.StdioTransport(in, stdout))
	logger.Info("shutting down")
	if err != nil && ctx.Err() == nil && !in.eof.Load() && !clientGone(err) {
		logger.Error("the MCP session ended with an error", "error", err)
		return exitFailure
	}
	return exitOK
}

// clientGone reports an error that says the client closed its end of the
// pipes — its process exited, or it closed the connection — which ends a
// session as the end of input does, whichever of the two the server
// meets first.
func clientGone(err error) bool {
	return errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE)
}

// eofReader records that its reader reached the end of its input.
type eofReader struct {
	io.ReadCloser
	eof atomic.Bool
}

func (r *eofReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		r.eof.Store(true)
	}
	return n, err
}

// withTools is opts with tools.
func withTools(opts codemode.Options, tools codemode.Tools) codemode.Options {
	opts.Tools = tools
	return opts
}

// noneIfZero maps a flag's "0 = no limit" to mcp.ServerOptions' negative
// "no limit" (its zero means the default).
func noneIfZero[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// httpConfig is what --http and its companion flags decided.
type httpConfig struct {
	addr     string
	token    string // empty: no authentication
	loopback bool   // addr is a loopback address
	console  http.Handler
}

func serveHTTP(ctx context.Context, cfg httpConfig, srv mcpServer, logger *slog.Logger, stderr io.Writer) int {
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
		return exitFailure
	}
	bound := ln.Addr().(*net.TCPAddr)
	if cfg.loopback && !bound.IP.IsLoopback() {
		// "localhost" is resolved by the listener; a hosts file that maps
		// it elsewhere must not turn a loopback bind into a public one.
		_ = ln.Close()
		fmt.Fprintf(stderr, "codemode mcp: --http %q bound %s, which is not a loopback address\n", cfg.addr, bound)
		return exitFailure
	}
	if !cfg.loopback {
		logger.Warn("serving other hosts over plain HTTP: the bearer token and the programs travel unencrypted; put TLS in front (a reverse proxy) or keep to a private network")
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", newHTTPGuard(srv.HTTPHandler(), cfg.token, cfg.loopback, strconv.Itoa(bound.Port)))
	if cfg.console != nil {
		// The console checks the token itself (a browser logs in once and
		// keeps a cookie); on loopback the guard still checks Host and
		// Origin, which a DNS-rebinding page cannot forge.
		mux.Handle("/console/", newHTTPGuard(cfg.console, "", cfg.loopback, strconv.Itoa(bound.Port)))
		mux.Handle("GET /{$}", http.RedirectHandler("/console/", http.StatusSeeOther))
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	logger.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp", "auth", cfg.token != "")
	if cfg.console != nil {
		logger.Info("serving the console", "url", "http://"+ln.Addr().String()+"/console/")
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
		return exitFailure
	}
	logger.Info("shutting down")
	// Event streams never go idle, so Shutdown gets a short grace period
	// for requests in flight and then the connections are closed.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	<-served
	return exitOK
}

// runWaitOption is ServerOptions.RunWait for --run-wait: the default when
// the flag is not given, no bound (negative) for an explicit 0.
func runWaitOption(fs *flag.FlagSet, d time.Duration) time.Duration {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "run-wait" })
	switch {
	case !set:
		return 0
	case d == 0:
		return -1
	}
	return d
}
