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
	"runtime/debug"
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

Flags come first. Exit status: 0 after a normal shutdown (end of input,
SIGINT or SIGTERM), 1 when the servers or the listener cannot start,
2 for usage errors (bad flags or a bad config file).

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
}

func (f *mcpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", `MCP servers file: {"mcpServers": {"name": {"command": ...} or {"url": ...}}}`)
	fs.StringVar(&f.httpAddr, "http", "", "serve streamable HTTP at ADDR (host:port; path /mcp) instead of standard input/output")
	fs.DurationVar(&f.timeout, "timeout", mcp.DefaultTimeout, "time limit of one run (0 = none)")
	fs.IntVar(&f.maxToolCalls, "max-tool-calls", mcp.DefaultMaxToolCalls, "most tool calls one run may make (0 = no limit)")
	fs.IntVar(&f.maxOutputBytes, "max-output-bytes", mcp.DefaultMaxOutputBytes, "most bytes of value and logs a result carries (0 = no limit)")
	f.maxMemory = codemode.DefaultMaxMemoryBytes
	fs.Var(&f.maxMemory, "max-memory", "engine memory limit of one run, in bytes or with a unit such as 64MiB")
	fs.IntVar(&f.maxConcurrency, "max-concurrency", codemode.DefaultMaxConcurrency, "tool calls of one run that execute at once")
	fs.IntVar(&f.catalogBudget, "catalog-budget", codemode.DefaultCatalogBudget, "estimated tokens of tool signatures the execute description lists")
	fs.DurationVar(&f.callTimeout, "call-timeout", 0, "time limit of one upstream MCP tool call; past it the call fails and the run goes on (0 = the run's limit)")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", mcp.DefaultConnectTimeout, "time limit for starting an MCP server and listing its tools")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "directory for the compiled engine cache")
	fs.BoolVar(&f.noCache, "no-cache", false, "do not keep the compiled engine on disk")
	fs.StringVar(&f.logLevel, "log-level", "info", "least severe log level written to standard error: debug, info, warn or error")
	f.sources.register(fs)
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

	current := func() codemode.Tools {
		all := up.Tools()
		for k, v := range extra {
			all[k] = v
		}
		return all
	}
	opts := f.runtimeOptions()
	opts.Tools = current()
	srv, err := mcp.NewServer(mcp.ServerOptions{Version: buildVersion(), Runtime: opts, Logger: logger})
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
		code = serveHTTP(ctx, f.httpAddr, srv, logger, stderr)
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

func serveHTTP(ctx context.Context, addr string, srv *mcp.Server, logger *slog.Logger, stderr io.Writer) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "codemode mcp: %v\n", err)
		return exitFailure
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	logger.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp")
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
