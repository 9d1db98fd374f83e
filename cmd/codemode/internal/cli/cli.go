// Package cli implements the codemode command.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cmd/codemode/internal/bench"
	"github.com/codemode-go/codemode/cmd/codemode/internal/demo"
	"github.com/codemode-go/codemode/internal/engine"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the program failed
	exitUsage   = 2 // bad flags or arguments
)

const usage = `codemode runs JavaScript/TypeScript programs against tools in a sandbox.

Usage:
  codemode run [flags] FILE|-           run a program (the body of an async function)
  codemode catalog [flags]              print every tool's path, description and signature (JSON)
  codemode instructions [flags]         print the model instructions (markdown)
  codemode search [flags] [QUERY]       search the tools as tools.$codemode.search does (JSON)
  codemode demo                         run the example program against the demo API (OpenAPI over loopback HTTP)
  codemode mcp [flags]                  serve execute over MCP (stdio, or --http ADDR) for --config servers and --openapi APIs
  codemode bench [--quick]              measure overhead, the tool-call bridge, compute (against node) and memory
  codemode engine install|path|verify   install the pinned engine binary, show where it comes from, check it
  codemode help                         show this help

Flags come before positional arguments. Run "codemode run -h" for the flags.
Tools come from --openapi PATH[=namespace] (credentials from --bearer-env,
--basic-env, --apikey-env SCHEME=NAME, naming environment variables) or
--demo-tools.
The result is printed as JSON; the exit status is 0 when the program
succeeded, 1 when it failed, 2 for usage errors.
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
	case "demo":
		return demoCmd(args[1:], stdout, stderr)
	case "catalog", "instructions", "search":
		return discoveryCmd(args[0], args[1:], stdout, stderr)
	case "bench":
		return benchCmd(args[1:], stdout, stderr)
	case "mcp":
		return mcpCmd(args[1:], stdin, stdout, stderr)
	case "engine":
		return engineCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "codemode: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// limitFlags are the flags every running command shares.
type limitFlags struct {
	timeout        time.Duration
	maxToolCalls   int
	maxOutputBytes int
	maxMemory      byteSize
	pretty         bool
	cacheDir       string
	noCache        bool
	catalogBudget  int
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&l.timeout, "timeout", codemode.UntrustedTimeout, "run time limit, a Go duration such as 500ms or 2s (0 = none)")
	fs.IntVar(&l.maxToolCalls, "max-tool-calls", codemode.UntrustedMaxToolCalls, "most tool calls a run may make (0 = no limit)")
	fs.IntVar(&l.maxOutputBytes, "max-output-bytes", codemode.UntrustedMaxOutputBytes, "most bytes of value and logs in the result (0 = no limit)")
	fs.Var(&l.maxMemory, "max-memory", "engine memory limit in bytes, e.g. 67108864 or 64MiB (default 64MiB)")
	fs.BoolVar(&l.pretty, "pretty", false, "indent the JSON result")
	fs.StringVar(&l.cacheDir, "cache-dir", defaultCacheDir(), "directory for the compiled engine cache")
	fs.BoolVar(&l.noCache, "no-cache", false, "do not keep the compiled engine on disk")
	fs.IntVar(&l.catalogBudget, "catalog-budget", 0, "estimated tokens of signatures the instructions inline (0 = 2000; negative = none, search only)")
}

func (l *limitFlags) options(tools codemode.Tools) codemode.Options {
	o := codemode.Options{
		Tools:          tools,
		Timeout:        l.timeout,
		MaxToolCalls:   l.maxToolCalls,
		MaxOutputBytes: l.maxOutputBytes,
		MaxMemoryBytes: int64(l.maxMemory),
		CatalogBudget:  l.catalogBudget,
	}
	if !l.noCache {
		o.CacheDir = l.cacheDir
	}
	return o
}

// defaultCacheDir keeps compiled code beside the engine binary, under the
// root $CODEMODE_CACHE_DIR moves.
func defaultCacheDir() string {
	if d, err := engine.CacheRoot(); err == nil {
		return filepath.Join(d, "engine")
	}
	return ""
}

func runCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("codemode run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lf limitFlags
	lf.register(fs)
	var sf sourceFlags
	sf.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: codemode run [flags] FILE|-\n\nRuns FILE (or standard input for -) and prints the Result as JSON.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "codemode run: want exactly one FILE (or - for standard input) after the flags")
		fs.Usage()
		return exitUsage
	}
	var code []byte
	var err error
	if name := fs.Arg(0); name == "-" {
		code, err = io.ReadAll(stdin)
	} else {
		code, err = os.ReadFile(name)
	}
	if err != nil {
		fmt.Fprintf(stderr, "codemode run: %v\n", err)
		return exitUsage
	}
	tools, err := sf.tools(warnf(stderr))
	if err != nil {
		fmt.Fprintf(stderr, "codemode run: %v\n", err)
		return exitUsage
	}
	return execute(lf, tools, string(code), stdout, stderr)
}

// warnf prints a warning line to stderr.
func warnf(stderr io.Writer) func(string, ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(stderr, "codemode: warning: "+format+"\n", args...)
	}
}

// discoveryCmd serves catalog, instructions and search.
func discoveryCmd(name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("codemode "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lf limitFlags
	lf.register(fs)
	var sf sourceFlags
	sf.register(fs)
	namespace := fs.String("namespace", "", "search: only tools in this namespace")
	limit := fs.Int("limit", 10, "search: most items to return (1-100)")
	offset := fs.Int("offset", 0, "search: items to skip")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if name != "search" && fs.NArg() != 0 || fs.NArg() > 1 {
		fmt.Fprintf(stderr, "codemode %s: unexpected arguments %q (flags come first)\n", name, fs.Args())
		return exitUsage
	}
	if *limit < 1 || *limit > 100 || *offset < 0 {
		fmt.Fprintf(stderr, "codemode %s: --limit must be 1..100 and --offset at least 0\n", name)
		return exitUsage
	}
	tools, err := sf.tools(warnf(stderr))
	if err != nil {
		fmt.Fprintf(stderr, "codemode %s: %v\n", name, err)
		return exitUsage
	}
	rt, err := codemode.New(lf.options(tools))
	if err != nil {
		return newFailed(err, stderr)
	}
	defer rt.Close()
	var v any
	switch name {
	case "instructions":
		fmt.Fprint(stdout, rt.Instructions())
		return exitOK
	case "catalog":
		v = rt.Catalog()
	case "search":
		v = rt.Search(codemode.SearchRequest{Query: fs.Arg(0), Namespace: *namespace, Limit: *limit, Offset: *offset})
	}
	if err := writeJSON(stdout, v, lf.pretty); err != nil {
		fmt.Fprintf(stderr, "codemode: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func benchCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("codemode bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "fewer repetitions")
	node := fs.String("node", "", `node binary for the comparison (default: node on PATH; "-" skips it)`)
	cacheDir := fs.String("cache-dir", defaultCacheDir(), "compilation cache for the cold-start measurement")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "codemode bench: takes no arguments")
		return exitUsage
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

func demoCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("codemode demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var lf limitFlags
	lf.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "codemode demo: takes no arguments")
		return exitUsage
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
	lf.pretty = true
	return execute(lf, tools, demo.Program, stdout, stderr)
}

func execute(lf limitFlags, tools codemode.Tools, code string, stdout, stderr io.Writer) int {
	rt, err := codemode.New(lf.options(tools))
	if err != nil {
		return newFailed(err, stderr)
	}
	defer rt.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := rt.Execute(ctx, code)
	if werr := writeJSON(stdout, res, lf.pretty); werr != nil {
		fmt.Fprintf(stderr, "codemode: %v\n", werr)
		return exitFailure
	}
	if err != nil || !res.OK {
		return exitFailure
	}
	return exitOK
}

// newFailed reports an error from codemode.New (already prefixed
// "codemode:"): bad options are a usage error, a missing engine a failure.
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

// byteSize is a flag value: a plain byte count or one with a unit suffix
// (KB, MB, GB powers of 1000; KiB, MiB, GiB powers of 1024; K/M/G as KiB).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
		{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(s), strings.ToUpper(u.suffix)) && len(s) > len(u.suffix) {
			s, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want a byte count such as 67108864 or 64MiB")
	}
	*b = byteSize(n * mult)
	return nil
}
