package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/enginebin"
)

// runtimeFlags configure the runtime a command builds. Each command
// registers only the groups it uses, so its help lists only flags that
// change something.
type runtimeFlags struct {
	timeout        duration
	maxToolCalls   int
	maxOutputBytes int
	maxMemory      byteSize
	maxConcurrency int
	catalogBudget  int
	pretty         bool
	cacheDir       string
	noCache        bool
	policy         string
	rules          *codemode.Rules // parsed from policy by check
}

// registerEngine adds the engine cache flags: every command that builds
// a runtime compiles the engine.
func (r *runtimeFlags) registerEngine(fs *flag.FlagSet) {
	fs.StringVar(&r.cacheDir, "cache-dir", defaultCacheDir(), "directory for the compiled engine cache")
	fs.BoolVar(&r.noCache, "no-cache", false, "do not keep the compiled engine on disk")
}

// registerLimits adds the limits a model is told about (the instructions
// state them) and a run enforces.
func (r *runtimeFlags) registerLimits(fs *flag.FlagSet) {
	r.timeout = duration(codemode.UntrustedTimeout)
	fs.Var(&r.timeout, "timeout", "time limit of one run, a `duration` with a unit: 500ms, 30s, 2m (0 = none)")
	r.maxToolCalls = codemode.UntrustedMaxToolCalls
	fs.Var(limitFlag{&r.maxToolCalls, "max-tool-calls", "for no calls at all, use --policy '*=deny'"}, "max-tool-calls", "most tool calls one run may make, or none for no limit")
	r.maxOutputBytes = codemode.UntrustedMaxOutputBytes
	fs.Var(limitFlag{&r.maxOutputBytes, "max-output-bytes", "a result always carries its diagnostic"}, "max-output-bytes", "most bytes of value and logs a result carries, or none for no limit")
}

// registerRun adds what only running a program uses.
func (r *runtimeFlags) registerRun(fs *flag.FlagSet) {
	r.maxMemory = codemode.DefaultMaxMemoryBytes
	fs.Var(&r.maxMemory, "max-memory", "engine memory limit of one run, a `size` in bytes or with a unit: 67108864, 64MiB, 1GiB (1 MiB to 2 GiB)")
	fs.IntVar(&r.maxConcurrency, "max-concurrency", codemode.DefaultMaxConcurrency, "tool calls of one run that execute at once")
	r.registerPolicy(fs)
}

// registerPolicy adds --policy.
func (r *runtimeFlags) registerPolicy(fs *flag.FlagSet) {
	fs.StringVar(&r.policy, "policy", "", "allow, deny or ask about each tool call by its annotations and name: `RULES` like "+
		"readonly=allow,destructive=deny,default=ask,orders.refund=ask: classes not given take default's verdict, and without default they deny; "+
		"a tool pattern has its namespace, * matches within one name; the most specific rules decide, and among equals deny beats ask beats allow (empty = no policy)")
}

// registerCatalog adds what shapes the instructions' catalog.
func (r *runtimeFlags) registerCatalog(fs *flag.FlagSet) {
	fs.IntVar(&r.catalogBudget, "catalog-budget", codemode.DefaultCatalogBudget, "estimated tokens of tool signatures the instructions list; search finds the rest (negative = none)")
}

// registerPretty adds --pretty, for commands that print JSON.
func (r *runtimeFlags) registerPretty(fs *flag.FlagSet) {
	fs.BoolVar(&r.pretty, "pretty", false, "indent the JSON output")
}

// check refuses values the runtime would refuse, in the flags' terms.
func (r *runtimeFlags) check() error {
	if m := int64(r.maxMemory); m != 0 && (m < 1<<20 || m > 2<<30) {
		return fmt.Errorf("--max-memory %s is outside 1 MiB to 2 GiB", humanBytes(m))
	}
	if r.policy != "" {
		rules, err := codemode.ParseRules(r.policy)
		if err != nil {
			return fmt.Errorf("--policy: %w", err)
		}
		r.rules = &rules
	}
	return nil
}

// options are the codemode.Options the flags describe; flags a command
// did not register keep their zero value, which means the default.
func (r *runtimeFlags) options(tools codemode.Tools) codemode.Options {
	o := codemode.Options{
		Tools:          tools,
		Timeout:        time.Duration(r.timeout),
		MaxToolCalls:   r.maxToolCalls,
		MaxOutputBytes: r.maxOutputBytes,
		MaxMemoryBytes: int64(r.maxMemory),
		MaxConcurrency: r.maxConcurrency,
		CatalogBudget:  r.catalogBudget,
	}
	if !r.noCache {
		o.CacheDir = r.cacheDir
	}
	if r.rules != nil {
		o.Policy = r.rules.Policy()
	}
	return o
}

// defaultCacheDir keeps compiled code in codemode's per-user cache, under the
// root $CODEMODE_CACHE_DIR moves.
func defaultCacheDir() string {
	if d, err := enginebin.CacheRoot(); err == nil {
		return filepath.Join(d, "engine")
	}
	return ""
}

// newFlagSet makes a subcommand's flag set, whose help (for -h) is the
// given text followed by the flags it registered.
func newFlagSet(name, help string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("codemode "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, help)
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses flags wherever they are among the arguments, so
// "codemode run prog.js --timeout 5s" works as well as flags first, and
// returns the other arguments in order. After "--" everything is an
// argument. A flag's own value is never taken for an argument, since the
// flag package consumes it. It prints the help for -h and a one-line
// error for a bad flag; parseError gives the exit status.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	out, help := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defer func() { fs.SetOutput(out); fs.Usage = help }()
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			fs.SetOutput(out)
			if errors.Is(err, flag.ErrHelp) {
				help()
			} else {
				flagFailed(out, fs, err)
			}
			return nil, err
		}
		left := fs.Args()
		consumed := args[:len(args)-len(left)]
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" && !isFlagValue(fs, consumed) {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		rest = append(rest, left[0])
		args = left[1:]
	}
}

// isFlagValue reports whether the last of the consumed arguments, "--",
// was the value of the flag before it ("--namespace --") rather than the
// end of the flags.
func isFlagValue(fs *flag.FlagSet, consumed []string) bool {
	if len(consumed) < 2 {
		return false
	}
	prev := strings.TrimLeft(consumed[len(consumed)-2], "-")
	if strings.Contains(prev, "=") || prev == "" {
		return false
	}
	f := fs.Lookup(prev)
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// parseError turns a flag parsing error into an exit status: 0 for -h.
func parseError(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// duration is a flag value: a Go duration with its unit. A bare number
// other than 0 is refused with a suggestion, since "--timeout 5" means
// five seconds to a person and five nanoseconds to time.ParseDuration.
type duration time.Duration

// String is the duration as a person writes it: 30s, 10m, 1h30m.
func (d *duration) String() string {
	s := time.Duration(*d).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (d *duration) Set(s string) error {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseFloat(s, 64); err == nil && n != 0 {
		return fmt.Errorf("%q has no unit: write %ss (seconds) or %sms (milliseconds)", s, s, s)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration with a unit, such as 500ms, 30s or 2m")
	}
	if v < 0 {
		return errors.New("must not be negative")
	}
	*d = duration(v)
	return nil
}

// byteSize is a flag value: a plain byte count or one with a unit suffix
// (KB, MB, GB powers of 1000; KiB, MiB, GiB powers of 1024; K/M/G as KiB).
type byteSize int64

// String is the size as a person writes it, such as 64MiB, so that the
// help's default reads as one and can be typed back.
func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range binaryUnits {
		if n != 0 && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.name)
		}
	}
	return strconv.FormatInt(n, 10)
}

// binaryUnits are the units sizes are written in, largest first.
var binaryUnits = []struct {
	name string
	size int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}

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
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("want a byte count such as 67108864 or 64MiB")
	}
	*b = byteSize(n * mult)
	return nil
}

// humanBytes writes n in the largest binary unit that divides it: 64 MiB,
// 1536 KiB, 1000 bytes, 1 byte.
func humanBytes(n int64) string {
	for _, u := range binaryUnits {
		if n != 0 && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// warnUnmatched warns about --policy patterns that match none of the
// runtime's tools: a typo, most likely, or a server that is not there.
func (r *runtimeFlags) warnUnmatched(rt *codemode.Runtime, stderr io.Writer) {
	if r.rules == nil {
		return
	}
	for _, p := range r.rules.Unmatched(rt) {
		fmt.Fprintf(stderr, "codemode: warning: --policy rule %q matches no tool\n", p)
	}
}

// limitFlag is a limit that is a positive number, or none. A bare 0 is
// refused: in opencode's contract a zero maxToolCalls allows no calls,
// and in codemode's options it means no limit, so a port would get the
// opposite of what it meant.
type limitFlag struct {
	n    *int
	name string
	zero string // what to write instead of 0 for "nothing"
}

func (l limitFlag) String() string {
	if l.n == nil {
		return ""
	}
	if *l.n == 0 {
		return "none"
	}
	return strconv.Itoa(*l.n)
}

func (l limitFlag) Set(v string) error {
	if v == "none" {
		*l.n = 0
		return nil
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil || n < 0:
		return fmt.Errorf("%q is not a positive number or none", v)
	case n == 0:
		return fmt.Errorf("0 is ambiguous (opencode reads it as nothing allowed, codemode once read it as no limit): write none for no limit (%s)", l.zero)
	}
	*l.n = n
	return nil
}
