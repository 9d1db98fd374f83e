package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codemode-go/codemode"
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
sessions are open at once (503 beyond), a session idle for
--http-idle-timeout is closed, and at most --max-runs programs run at
once over all sessions (more wait their turn).

Flags come first. Exit status: 0 after a normal shutdown (end of input,
SIGINT or SIGTERM), 1 when the servers or the listener cannot start,
2 for usage errors (bad flags, a bad config file, or an address the
flags do not allow).

Flags:
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
	config         string
	httpAddr       string
	timeout        time.Duration
	maxToolCalls   int
	maxOutputBytes int
	maxMemory      byteSize
	maxConcurrency int
	catalogBudget  int
	callTimeout    time.Duration
	connectTimeout time.Duration
	cacheDir       string
	noCache        bool
	logLevel       string
	sources        sourceFlags // --openapi and the other tool sources

	maxRuns         int
	httpAllowRemote bool
	httpTokenEnv    string
	httpMaxSessions int
	httpIdleTimeout time.Duration
}

// defaultMaxRuns is --max-runs' default: runs are mostly CPU-bound while
// they compute, so a few more than the cores keeps them busy while some
// wait on tools, without letting a burst of calls take every core and an
// engine's memory each.
func defaultMaxRuns() int { return 2 * runtime.GOMAXPROCS(0) }

func (f *mcpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", `MCP servers file: {"mcpServers": {"name": {"command": ...} or {"url": ...}}}`)
	fs.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP at ADDR (host:port, loopback unless --http-allow-remote; path /mcp) instead of standard input/output")
	fs.DurationVar(&f.timeout, "timeout", codemode.UntrustedTimeout, "time limit of one run (0 = none)")
	fs.IntVar(&f.maxToolCalls, "max-tool-calls", codemode.UntrustedMaxToolCalls, "most tool calls one run may make (0 = no limit)")
	fs.IntVar(&f.maxOutputBytes, "max-output-bytes", codemode.UntrustedMaxOutputBytes, "most bytes of value and logs a result carries (0 = no limit)")
	f.maxMemory = codemode.DefaultMaxMemoryBytes
	fs.Var(&f.maxMemory, "max-memory", "engine memory limit of one run, in bytes or with a unit such as 64MiB")
	fs.IntVar(&f.maxConcurrency, "max-concurrency", codemode.DefaultMaxConcurrency, "tool calls of one run that execute at once")
	fs.IntVar(&f.catalogBudget, "catalog-budget", codemode.DefaultCatalogBudget, "estimated tokens of tool signatures the execute description lists (negative = none, search only)")
	fs.DurationVar(&f.callTimeout, "call-timeout", 0, "time limit of one upstream MCP tool call; past it the call fails and the run goes on (0 = the run's limit)")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", mcp.DefaultConnectTimeout, "time limit for starting an MCP server and listing its tools")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "directory for the compiled engine cache")
	fs.BoolVar(&f.noCache, "no-cache", false, "do not keep the compiled engine on disk")
	fs.StringVar(&f.logLevel, "log-level", "info", "least severe log level written to standard error: debug, info, warn or error")
	fs.IntVar(&f.maxRuns, "max-runs", defaultMaxRuns(), "most programs running at once over all sessions, by default twice GOMAXPROCS; more wait for a slot (0 = no limit)")
	fs.BoolVar(&f.httpAllowRemote, "http-allow-remote", false, "let --http bind a non-loopback address (needs --http-token-env)")
	fs.StringVar(&f.httpTokenEnv, "http-token-env", "", "require the bearer token held in environment variable `NAME` on every HTTP request (at least 16 bytes)")
	fs.IntVar(&f.httpMaxSessions, "http-max-sessions", mcp.DefaultMaxSessions, "most HTTP sessions open at once; more are refused with 503 (0 = no limit)")
	fs.DurationVar(&f.httpIdleTimeout, "http-idle-timeout", mcp.DefaultSessionIdleTimeout, "close an HTTP session after this long without a request (0 = never)")
	f.sources.register(fs)
}

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
	if f.httpMaxSessions < 0 || f.httpIdleTimeout < 0 {
		return "", false, errors.New("--http-max-sessions and --http-idle-timeout must not be negative")
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

func (f *mcpFlags) runtimeOptions() codemode.Options {
	o := codemode.Options{
		Timeout:        f.timeout,
		MaxToolCalls:   f.maxToolCalls,
		MaxOutputBytes: f.maxOutputBytes,
		MaxMemoryBytes: int64(f.maxMemory),
		MaxConcurrency: f.maxConcurrency,
		CatalogBudget:  f.catalogBudget,
	}
	if !f.noCache {
		o.CacheDir = f.cacheDir
	}
	return o
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

// runMCP is mcpCmd with the stopping context given, for tests.
func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("codemode mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f mcpFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, mcpUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "codemode mcp: unexpected arguments %q (flags come first)\n", fs.Args())
		return exitUsage
	}
	level, err := parseLevel(f.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "codemode mcp: --log-level %q is not debug, info, warn or error\n", f.logLevel)
		return exitUsage
	}
	if f.timeout < 0 || f.callTimeout < 0 || f.connectTimeout < 0 {
		fmt.Fprintln(stderr, "codemode mcp: durations must not be negative")
		return exitUsage
	}
	if f.maxRuns < 0 {
		fmt.Fprintln(stderr, "codemode mcp: --max-runs must not be negative")
		return exitUsage
	}
	token, loopback, err := f.httpSettings(fs)
	if err != nil {
		fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
		return exitUsage
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	cfg := &mcp.Config{}
	if f.config != "" {
		if cfg, err = mcp.LoadConfig(f.config); err != nil {
			fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
			return exitUsage
		}
	}
	extra, err := f.sources.tools(func(format string, args ...any) { logger.Warn(fmt.Sprintf(format, args...)) })
	if err != nil {
		fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
		return exitUsage
	}
	for name := range cfg.Servers {
		if _, clash := extra[name]; clash {
			fmt.Fprintf(stderr, "codemode mcp: the namespace %q is both a configured server and another source's\n", name)
			return exitUsage
		}
	}
	if len(cfg.Servers) == 0 && len(extra) == 0 {
		logger.Warn("no tools: give --config (or another tool source); programs can only compute")
	}

	up, err := mcp.Connect(ctx, cfg, mcp.ClientOptions{
		Version:        buildVersion(),
		Logger:         logger,
		ConnectTimeout: f.connectTimeout,
		CallTimeout:    f.callTimeout,
	})
	if err != nil {
		fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
		return exitFailure
	}

	// Every server's namespace is in up.Tools() from the start, so a clash
	// with the --openapi namespaces shows now or never.
	if _, err := codemode.Merge(up.Tools(), extra); err != nil {
		_ = up.Close()
		fmt.Fprintf(stderr, "codemode mcp: an MCP server and an --openapi document: %v\n", err)
		return exitUsage
	}
	current := func() codemode.Tools {
		all, _ := codemode.Merge(up.Tools(), extra)
		return all
	}
	opts := f.runtimeOptions()
	opts.Tools = current()
	srv, err := mcp.NewServer(mcp.ServerOptions{
		Version:            buildVersion(),
		Runtime:            opts,
		Logger:             logger,
		MaxRuns:            f.maxRuns,
		MaxSessions:        noneIfZero(f.httpMaxSessions),
		SessionIdleTimeout: noneIfZero(f.httpIdleTimeout),
	})
	if err != nil {
		_ = up.Close()
		fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
		return exitUsage
	}

	// Follow the upstreams' tool lists until they close.
	var follow sync.WaitGroup
	follow.Add(1)
	go func() {
		defer follow.Done()
		for range up.Changed() {
			if err := srv.SetTools(current()); err != nil && !errors.Is(err, mcp.ErrServerClosed) {
				logger.Error("the new tool list was refused; keeping the old one", "error", err)
			}
		}
	}()

	var code int
	if f.httpAddr != "" {
		code = serveHTTP(ctx, httpConfig{addr: f.httpAddr, token: token, loopback: loopback}, srv, logger, stderr)
	} else {
		code = serveStdio(ctx, srv, stdin, stdout, logger)
	}
	// Runs first (they may still call upstream tools), then the servers;
	// closing the upstreams closes Changed, which ends the follower.
	_ = srv.Close()
	_ = up.Close()
	follow.Wait()
	return code
}

func serveStdio(ctx context.Context, srv *mcp.Server, stdin io.Reader, stdout io.Writer, logger *slog.Logger) int {
	// Closing the reader is what unblocks a pending read at shutdown, so
	// keep stdin's Close when it has one.
	rc, ok := stdin.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(stdin)
	}
	logger.Info("serving MCP on standard input/output")
	err := srv.MCP().Run(ctx, &mcpsdk.IOTransport{Reader: rc, Writer: nopWriteCloser{stdout}})
	if err != nil && ctx.Err() == nil {
		logger.Error("the MCP session ended with an error", "error", err)
	}
	logger.Info("shutting down")
	return exitOK
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
}

func serveHTTP(ctx context.Context, cfg httpConfig, srv *mcp.Server, logger *slog.Logger, stderr io.Writer) int {
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
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	logger.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp", "auth", cfg.token != "")
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

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// buildVersion is the module version the binary was built from.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
