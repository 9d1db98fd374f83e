// Package cli implements the codemode command.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cmd/codemode/internal/bench"
	"github.com/codemode-go/codemode/cmd/codemode/internal/demo"
	"github.com/codemode-go/codemode/mcp"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the program failed
	exitUsage   = 2 // bad flags or arguments
)

// (exitSuspended, 3, is in suspend.go.)

const usage = `codemode runs JavaScript/TypeScript programs against tools in a sandbox.

Usage:
  codemode run [flags] FILE|-           run a program (the body of an async function)
  codemode resume [flags] DIR           continue a run suspended by run --suspend-dir DIR
  codemode catalog [flags]              print every tool's path, description and signature (JSON)
  codemode instructions [flags]         print the model instructions (markdown)
  codemode search [flags] [QUERY]       search the tools as tools.$codemode.search does (JSON)
  codemode demo                         run the example program against the demo API (OpenAPI over loopback HTTP)
  codemode mcp [flags]                  serve execute over MCP (stdio, or --http ADDR) for --config servers and --openapi APIs
  codemode login NAME --config FILE     authorize codemode to a remote --config server that asks for OAuth (opens a browser)
  codemode serve [--worker] [flags]     serve execute like mcp, running programs on a cluster's workers (NATS JetStream)
  codemode worker [flags]               run the programs of a cluster's fronts
  codemode nodes [flags]                list the cluster's fronts and workers
  codemode drain [flags] NAME           have a worker finish its runs and stop
  codemode bench [--quick]              measure overhead, the tool-call bridge, compute (against node) and memory
  codemode engine path|verify           show where the built-in engine comes from, check it
  codemode version                      print the version
  codemode help                         show this help

Tools come from --config FILE (MCP servers, in the file format MCP clients
use), --openapi PATH[=namespace] (credentials from --bearer-env,
--basic-env, --apikey-env SCHEME=NAME, naming environment variables) and
--demo-tools, the same for every command. Flags may come before or after
the arguments; run "codemode COMMAND -h" for a command's flags.
The result is printed as JSON; the exit status is 0 when the program
succeeded, 1 when it failed or could not run (no engine, a tool source
that cannot start), 2 for usage errors (bad commands, flags or
arguments), 3 when a run is suspended waiting for calls (run
--suspend-dir, resume).
`

// Run executes the command line and returns the exit status.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCmd(args[1:], stdin, stdout, stderr)
	case "resume":
		return resumeCmd(args[1:], stdout, stderr)
	case "demo":
		return demoCmd(args[1:], stdout, stderr)
	case "catalog", "instructions", "search":
		return discoveryCmd(args[0], args[1:], stdout, stderr)
	case "bench":
		return benchCmd(args[1:], stdout, stderr)
	case "serve":
		return serveCmd(args[1:], stdin, stdout, stderr)
	case "worker":
		return workerCmd(args[1:], stderr)
	case "nodes":
		return nodesCmd(args[1:], stdout, stderr)
	case "drain":
		return drainCmd(args[1:], stdout, stderr)
	case "mcp":
		return mcpCmd(args[1:], stdin, stdout, stderr)
	case "login":
		return loginCmd(args[1:], stdout, stderr)
	case "engine":
		return engineCmd(args[1:], stdout, stderr)
	case "version":
		return versionCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	return unknownCommand(stderr, "codemode", args[0], commands, "codemode help")
}

const runHelp = `Usage: codemode run [flags] FILE|-

Runs FILE (or standard input for -), the body of an async function in
JavaScript or TypeScript, against the tools of --config, --openapi and
--demo-tools, and prints the Result as JSON. Flags may come before or
after FILE. Exit status: 0 when the program succeeded, 1 when it failed
or could not run (no engine, or a --config server that could not start
under --require-all), 2 for usage errors, 3 when it is suspended.

With --suspend-dir DIR no tool is called: when the program waits for
calls, the run stops and DIR gets its state (authenticated with the key in
--state-key-file) and one file per pending call, DIR/pending/ID.json. A
person or a program decides, and codemode resume DIR continues the run, in
a new process, hours later if need be. The state holds the program's data
and the tools' results: keep DIR where those may be kept. With --policy,
only the calls it asks about wait; the calls it allows run at once.
Without --suspend-dir, calls it asks about are denied (nobody can answer).
`

func runCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", runHelp, stderr)
	var rf runtimeFlags
	rf.registerLimits(fs)
	rf.registerRun(fs)
	rf.registerPretty(fs)
	rf.registerEngine(fs)
	var sf sourceFlags
	sf.register(fs, true, "warn")
	var sfl suspendFlags
	fs.StringVar(&sfl.dir, "suspend-dir", "", "suspend the run in this `directory` when it waits for tool calls, instead of calling them (see codemode resume)")
	fs.BoolVar(&sfl.countAway, "timeout-includes-suspended", false, "with --suspend-dir: time spent suspended counts against --timeout")
	sfl.registerKey(fs)
	rest, err := parseArgs(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(rest) != 1 {
		return usageFailed(stderr, "codemode run", "want exactly one FILE (or - for standard input), got %d", len(rest))
	}
	if err := rf.check(); err != nil {
		return usageFailed(stderr, "codemode run", "%v", err)
	}
	var program []byte
	if name := rest[0]; name == "-" {
		program, err = io.ReadAll(stdin)
	} else {
		program, err = os.ReadFile(name)
	}
	if err != nil {
		fmt.Fprintf(stderr, "codemode run: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	src, exit := openSources(ctx, "run", &sf, stderr)
	if src == nil {
		return exit
	}
	defer src.close()
	if sfl.dir != "" {
		flags, err := givenFlags(fs)
		if err != nil {
			fmt.Fprintf(stderr, "codemode run: %v\n", err)
			return exitUsage
		}
		return suspendRun(ctx, rf, sfl, flags, src.tools(), string(program), stdout, stderr)
	}
	return execute(ctx, rf, src.tools(), string(program), stdout, stderr)
}

// openSources opens the tool sources for a one-shot command. On failure
// it prints why and returns nil with the exit status.
func openSources(ctx context.Context, name string, sf *sourceFlags, stderr io.Writer) (*toolSource, int) {
	logger, err := sf.logger(stderr, false)
	if err != nil {
		fmt.Fprintf(stderr, "codemode %s: %v\n", name, err)
		return nil, exitUsage
	}
	src, err := sf.open(ctx, logger, false)
	if err != nil {
		fmt.Fprintf(stderr, "codemode %s: %v\n", name, err)
		return nil, exitFor(err)
	}
	return src, exitOK
}

// discoveryHelp is each discovery command's help.
var discoveryHelp = map[string]string{
	"catalog": `Usage: codemode catalog [flags]

Prints every tool of --config, --openapi and --demo-tools as JSON: its
path, description and TypeScript signature.
`,
	"instructions": `Usage: codemode instructions [flags]

Prints the instructions a model gets for these tools (markdown): the
description codemode mcp gives its execute tool, with the --config
servers that cannot start named as unavailable. They state the run
limits, so --timeout, --max-tool-calls and --max-output-bytes change them.
`,
	"search": `Usage: codemode search [flags] [QUERY]

Searches the tools of --config, --openapi and --demo-tools as a
program's tools.$codemode.search does, and prints the page as JSON.
`,
}

// discoveryCmd serves catalog, instructions and search.
func discoveryCmd(name string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(name, discoveryHelp[name], stderr)
	var rf runtimeFlags
	switch name {
	case "instructions":
		rf.registerLimits(fs)
		rf.registerCatalog(fs)
	default:
		rf.registerPretty(fs)
	}
	rf.registerEngine(fs)
	var sf sourceFlags
	sf.register(fs, false, "warn")
	var namespace string
	var limit, offset int
	if name == "search" {
		fs.StringVar(&namespace, "namespace", "", "only tools in this namespace")
		fs.IntVar(&limit, "limit", 10, "most items to return (1 to 100)")
		fs.IntVar(&offset, "offset", 0, "items to skip")
	}
	rest, err := parseArgs(fs, args)
	if err != nil {
		return parseError(err)
	}
	if name != "search" && len(rest) != 0 || len(rest) > 1 {
		return usageFailed(stderr, "codemode "+name, "unexpected arguments %q", rest)
	}
	if name == "search" && (limit < 1 || limit > 100 || offset < 0) {
		return usageFailed(stderr, "codemode "+name, "--limit must be 1 to 100 and --offset at least 0")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	src, exit := openSources(ctx, name, &sf, stderr)
	if src == nil {
		return exit
	}
	defer src.close()
	rt, err := codemode.New(rf.options(src.tools()))
	if err != nil {
		return newFailed(err, stderr)
	}
	defer rt.Close()
	var v any
	switch name {
	case "instructions":
		fmt.Fprint(stdout, mcp.ExecuteDescription(rt, src.unavailable()...))
		return exitOK
	case "catalog":
		v = rt.Catalog()
	case "search":
		q := ""
		if len(rest) == 1 {
			q = rest[0]
		}
		v = rt.Search(codemode.SearchRequest{Query: q, Namespace: namespace, Limit: limit, Offset: offset})
	}
	if err := writeJSON(stdout, v, rf.pretty); err != nil {
		fmt.Fprintf(stderr, "codemode: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func benchCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench", "Usage: codemode bench [flags]\n\nMeasures overhead, the tool-call bridge, compute (against node) and memory, and prints the table.\n", stderr)
	quick := fs.Bool("quick", false, "fewer repetitions")
	node := fs.String("node", "", `node binary for the comparison (default: node on PATH; "-" skips it)`)
	cacheDir := fs.String("cache-dir", defaultCacheDir(), "compilation cache for the cold-start measurement")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(rest) != 0 {
		return usageFailed(stderr, "codemode bench", "takes no arguments")
	}
	exe, err := os.Executable()
	if err != nil {
		exe = ""
	}
	fmt.Fprintln(stderr, "measuring (about a minute)...")
	rep, err := bench.Run(context.Background(), bench.Options{Quick: *quick, Executable: exe, CacheDir: *cacheDir, Node: *node})
	if err != nil {
		fmt.Fprintf(stderr, "codemode bench: %v\n", err)
		return exitFailure
	}
	rep.Write(stdout)
	return exitOK
}

// writeJSON prints v as JSON without HTML escaping, so signatures keep
// their < and >.
func writeJSON(w io.Writer, v any, pretty bool) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if pretty {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

const demoHelp = `Usage: codemode demo [flags]
       codemode demo --serve ADDR --token-env NAME [--spec-out FILE]

Runs the example program against the demo API, an OpenAPI document served
on loopback HTTP, and prints the program and its Result.

With --serve it only serves the demo API, at ADDR (a loopback address),
until interrupted, accepting the bearer token held in the environment
variable --token-env names; --spec-out writes its OpenAPI document, to
give to codemode run, mcp and the others with --openapi FILE,
--base-url http://ADDR and --bearer-env NAME.
`

func demoCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", demoHelp, stderr)
	var rf runtimeFlags
	rf.registerLimits(fs)
	rf.registerRun(fs)
	rf.registerEngine(fs)
	serve := fs.String("serve", "", "only serve the demo API, at `ADDR` (host:port on loopback), until interrupted")
	tokenEnv := fs.String("token-env", "", "with --serve: the environment variable `NAME` holding the bearer token the API accepts")
	specOut := fs.String("spec-out", "", "with --serve: write the API's OpenAPI document to `FILE`")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(rest) != 0 {
		return usageFailed(stderr, "codemode demo", "takes no arguments")
	}
	if *serve != "" || *tokenEnv != "" || *specOut != "" {
		return demoServe(*serve, *tokenEnv, *specOut, stdout, stderr)
	}
	if err := rf.check(); err != nil {
		return usageFailed(stderr, "codemode demo", "%v", err)
	}
	// The demo tools are an OpenAPI document served on loopback: the
	// program's calls are real HTTP requests, authorized on the host side.
	tools, stop, err := demo.Start(context.Background())
	if err != nil {
		fmt.Fprintf(stderr, "codemode demo: %v\n", err)
		return exitFailure
	}
	defer stop()
	fmt.Fprintf(stderr, "Program:\n%s\n", indent(demo.Program))
	rf.pretty = true
	ctx, stopSignal := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stopSignal()
	return execute(ctx, rf, tools, demo.Program, stdout, stderr)
}

// demoServe is codemode demo --serve: the demo API alone, for the
// other commands to call as an OpenAPI source.
func demoServe(addr, tokenEnv, specOut string, stdout, stderr io.Writer) int {
	if addr == "" || tokenEnv == "" {
		return usageFailed(stderr, "codemode demo", "--serve ADDR and --token-env NAME go together")
	}
	if loopback, err := loopbackBind(addr); err != nil || !loopback {
		return usageFailed(stderr, "codemode demo", "--serve %q: want a loopback host:port, such as 127.0.0.1:8080", addr)
	}
	token := os.Getenv(tokenEnv)
	if token == "" {
		return usageFailed(stderr, "codemode demo", "--token-env: the environment variable %s is empty or unset", tokenEnv)
	}
	if specOut != "" {
		if err := os.WriteFile(specOut, demo.ShopSpec, 0o644); err != nil {
			fmt.Fprintf(stderr, "codemode demo: %v\n", err)
			return exitFailure
		}
	}
	url, stop, err := demo.Serve(addr, token)
	if err != nil {
		fmt.Fprintf(stderr, "codemode demo: %v\n", err)
		return exitFailure
	}
	defer stop()
	ctx, stopSignal := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignal()
	fmt.Fprintf(stdout, "serving the demo shop API at %s until interrupted (bearer token from $%s)\n", url, tokenEnv)
	<-ctx.Done()
	return exitOK
}

// warnf prints a warning line to stderr.
func warnf(stderr io.Writer) func(string, ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(stderr, "codemode: warning: "+format+"\n", args...)
	}
}

func execute(ctx context.Context, rf runtimeFlags, tools codemode.Tools, code string, stdout, stderr io.Writer) int {
	tel := startTelemetry(warnf(stderr))
	defer tel.shutdown()
	opts := rf.options(tools)
	tel.configure(&opts)
	rt, err := codemode.New(opts)
	if err != nil {
		return newFailed(err, stderr)
	}
	defer rt.Close()
	rf.warnUnmatched(rt, stderr)
	res, err := rt.Execute(ctx, code)
	if werr := writeJSON(stdout, res, rf.pretty); werr != nil {
		fmt.Fprintf(stderr, "codemode: %v\n", werr)
		return exitFailure
	}
	if err != nil || !res.OK {
		return exitFailure
	}
	return exitOK
}

// newFailed reports an error from codemode.New (already prefixed
// "codemode:"): bad options are a usage error (2), a missing engine a
// failure (1): the command line was right, and what has to change is the
// installation, which retyping the command will not fix.
func newFailed(err error, stderr io.Writer) int {
	fmt.Fprintln(stderr, err)
	if errors.Is(err, codemode.ErrInvalidOptions) {
		return exitUsage
	}
	return exitFailure
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}
