package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/codemode-go/codemode/internal/quickjs"
	"github.com/codemode-go/codemode/internal/sandbox"
	"github.com/codemode-go/codemode/internal/secret"
)

var engineUsage = `Usage:
  codemode engine path             print where the engine comes from: SOURCE<TAB>WHERE
  codemode engine verify [--cache-dir DIR]
                                   check the engine binary against the pinned hash, and
                                   the compiled engine cache (DIR, default the one the
                                   other commands use) against the per-user key that signs it
  codemode engine install          does nothing: the engine is built in (kept so that
                                   scripts which ran it still work)

The engine is QuickJS-NG from npm quickjs-wasi@` + enginebin.PackageVersion + `, SHA-256
` + enginebin.SHA256 + `.
It is built into this binary. $` + enginebin.EnvWasm + `, when set, names a file
to read it from instead, which must hold the same build. Compiled code is
loaded from a cache directory only when it belongs to you, only you can
write it, and the key in $` + secret.EnvConfigDir + `/cache.key (default the user
config directory, then codemode/cache.key) signed it; verify reports each
entry that is unsigned (it is compiled afresh) or fails its MAC.
`

func engineCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, engineUsage)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, engineUsage)
		return exitOK
	case "install":
		// Once the way to fetch the engine; now there is nothing to
		// fetch, and a script that still runs it should go on working.
		fmt.Fprintf(stderr, "codemode engine install: nothing to install: the engine (quickjs-wasi@%s) is built into codemode; `codemode engine verify` checks it\n", enginebin.PackageVersion)
		return exitOK
	case "path", "verify":
	default:
		return unknownCommand(stderr, "codemode engine", name, []string{"install", "path", "verify", "help"}, "codemode engine help")
	}
	fs := flag.NewFlagSet("codemode engine "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, engineUsage) }
	var cacheDir string
	if name == "verify" {
		fs.StringVar(&cacheDir, "cache-dir", defaultCacheDir(), "compiled engine cache to check")
	}
	rest, err := parseArgs(fs, args[1:])
	if err != nil {
		return parseError(err)
	}
	if len(rest) > 0 {
		return usageFailed(stderr, "codemode engine "+name, "unexpected arguments %q", rest)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "codemode engine %s: %v\n", name, err)
		return exitFailure
	}
	if name == "path" {
		return enginePath(stdout, fail)
	}
	return engineVerify(cacheDir, stdout, fail)
}

// enginePath prints the source a program would take the engine from.
func enginePath(stdout io.Writer, fail func(error) int) int {
	_, src, err := enginebin.DefaultFinder().Find(context.Background())
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "%s\t%s\n", src.Kind, where(src))
	return exitOK
}

func where(src enginebin.Source) string {
	if src.Kind == enginebin.Embedded {
		return "built into this binary"
	}
	return src.Path
}

// engineVerify hashes the engine binary, and the file $CODEMODE_ENGINE_WASM
// names when it is set, one line each:
// SOURCE<TAB>WHERE<TAB>SHA256<TAB>ok|MISMATCH (or the read error); then
// checks the compiled code in cacheDir (see verifyCompiled).
func engineVerify(cacheDir string, stdout io.Writer, fail func(error) int) int {
	f := enginebin.DefaultFinder()
	fmt.Fprintf(stdout, "pinned\tquickjs-wasi@%s\t%s\n", enginebin.PackageVersion, enginebin.SHA256)
	var errs []error
	report := func(src enginebin.Source, err error) {
		var mm *enginebin.MismatchError
		switch {
		case errors.As(err, &mm):
			fmt.Fprintf(stdout, "%s\t%s\t%s\tMISMATCH\n", src.Kind, where(src), mm.Got)
		case err != nil:
			fmt.Fprintf(stdout, "%s\t%s\t-\t%v\n", src.Kind, where(src), err)
		default:
			fmt.Fprintf(stdout, "%s\t%s\t%s\tok\n", src.Kind, where(src), enginebin.SHA256)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	src := enginebin.Source{Kind: enginebin.Embedded}
	report(src, enginebin.Verify(f.Embedded, src))
	if f.EnvPath != "" {
		_, src, err := enginebin.Finder{EnvPath: f.EnvPath}.Find(context.Background())
		report(src, err)
	}
	if cacheDir != "" {
		if err := verifyCompiled(cacheDir, stdout); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fail(errors.Join(errs...))
	}
	return exitOK
}

// verifyCompiled checks the compiled engine cache dir as a run would
// before loading from it, one line per entry:
// compiled<TAB>PATH<TAB>-<TAB>ok|UNSIGNED|MISMATCH (or the problem). An
// unsigned entry is not an error: a run never loads it, but compiles the
// engine afresh in its place.
func verifyCompiled(dir string, stdout io.Writer) error {
	key, file, err := sandbox.CacheKey()
	switch {
	case errors.Is(err, secret.ErrUnsafe):
		fmt.Fprintf(stdout, "compiled\t%s\t-\t%v\n", dir, err)
		return fmt.Errorf("the key that signs compiled code is unsafe: %w", err)
	case err != nil:
		// Runs then compile in memory and never read dir.
		fmt.Fprintf(stdout, "compiled\t%s\t-\tnot used: no key (%v)\n", dir, err)
		return nil
	}
	entries, err := quickjs.CheckCache(dir, key)
	if err != nil {
		fmt.Fprintf(stdout, "compiled\t%s\t-\t%v\n", dir, err)
		return fmt.Errorf("compiled engine cache %s: %w", dir, err)
	}
	bad := 0
	for _, e := range entries {
		status := "ok"
		switch {
		case e.Err == nil:
		case errors.Is(e.Err, quickjs.ErrCacheUnsigned):
			status = "UNSIGNED"
		case errors.Is(e.Err, quickjs.ErrCacheMismatch):
			bad++
			status = "MISMATCH"
		default:
			bad++
			status = e.Err.Error()
		}
		fmt.Fprintf(stdout, "compiled\t%s\t-\t%s\n", e.Path, status)
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d compiled engine cache entries fail their check against the key in %s (changed since they were signed, or signed with another key); the next run removes and recompiles what it can", bad, len(entries), file)
	}
	return nil
}
