package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/codemode-go/codemode/internal/quickjs"
	"github.com/codemode-go/codemode/internal/sandbox"
	"github.com/codemode-go/codemode/internal/secret"
)

var engineUsage = `Usage:
  codemode engine install [FILE]   put the pinned engine in the per-user cache: fetch it
                                   with npm, or copy FILE (quickjs.wasm, or the npm tarball
                                   quickjs-wasi-` + enginebin.PackageVersion + `.tgz) for hosts without a network
  codemode engine path             print where the engine resolves from: SOURCE<TAB>WHERE
  codemode engine verify [--cache-dir DIR]
                                   check every engine binary present against the pinned hash,
                                   and the compiled engine cache (DIR, default the one the
                                   other commands use) against the per-user key that signs it

The engine is QuickJS-NG from npm quickjs-wasi@` + enginebin.PackageVersion + `, SHA-256
` + enginebin.SHA256 + `.
It is resolved at run time, in order: the copy built in with -tags
codemode_embed, the file $` + enginebin.EnvWasm + ` names, the per-user cache
($` + enginebin.EnvCacheDir + ` or the user cache directory, then
codemode/engine/SHA256/quickjs.wasm), and npm pack when npm is on PATH,
which fills the cache. Compiled code is loaded from a cache directory
only when it belongs to you, only you can write it, and the key in
$` + secret.EnvConfigDir + `/cache.key (default the user config directory,
then codemode/cache.key) signed it; verify reports each entry that is
unsigned (it is compiled afresh) or fails its MAC.
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
	case "install", "path", "verify":
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
	maxArgs := 0
	if name == "install" {
		maxArgs = 1
	}
	if len(rest) > maxArgs {
		return usageFailed(stderr, "codemode engine "+name, "unexpected arguments %q", rest)
	}
	arg := ""
	if len(rest) == 1 {
		arg = rest[0]
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "codemode engine %s: %v\n", name, err)
		return exitFailure
	}
	switch name {
	case "install":
		return engineInstall(arg, stdout, stderr, fail)
	case "path":
		return enginePath(stdout, fail)
	}
	return engineVerify(cacheDir, stdout, fail)
}

// engineInstall writes the engine to the cache from FILE, or from npm when
// file is empty, and prints the cache file's path.
func engineInstall(file string, stdout, stderr io.Writer, fail func(error) int) int {
	root, err := enginebin.CacheRoot()
	if err != nil {
		return fail(fmt.Errorf("no per-user cache directory (%v): set $%s", err, enginebin.EnvCacheDir))
	}
	var b []byte
	src := enginebin.Source{Kind: enginebin.File, Path: file}
	if file != "" {
		if b, err = os.ReadFile(file); err != nil {
			return fail(err)
		}
		// An npm tarball is gzip; a wasm module starts with "\0asm".
		if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			if b, err = enginebin.FromTarball(b, src); err != nil {
				return fail(err)
			}
		}
	} else {
		path := enginebin.CachePath(root)
		if cur, err := os.ReadFile(path); err == nil && enginebin.Verify(cur, enginebin.Source{}) == nil {
			fmt.Fprintln(stdout, path)
			return exitOK
		}
		npm := enginebin.DefaultFinder().Npm
		if npm == "" {
			return fail(fmt.Errorf("npm is not on PATH: install Node.js, or run `npm pack quickjs-wasi@%s` on a machine that has it and then `codemode engine install quickjs-wasi-%[1]s.tgz` here", enginebin.PackageVersion))
		}
		fmt.Fprintf(stderr, "fetching quickjs-wasi@%s with npm...\n", enginebin.PackageVersion)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		src = enginebin.Source{Kind: enginebin.Npm}
		if b, err = enginebin.FetchNpm(ctx, npm); err != nil {
			return fail(err)
		}
	}
	path, err := enginebin.Install(root, b, src)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout, path)
	return exitOK
}

// enginePath prints the source a program would resolve the engine from.
// It never fetches: when only npm would do, it says so.
func enginePath(stdout io.Writer, fail func(error) int) int {
	f := enginebin.DefaultFinder()
	npm := f.Npm
	f.Npm = ""
	_, src, err := f.Find(context.Background())
	switch {
	case err == nil:
	case errors.Is(err, enginebin.ErrUnavailable) && npm != "" && src.Kind == 0:
		where := "npm pack quickjs-wasi@" + enginebin.PackageVersion + ", on first use"
		if f.CacheRoot != "" {
			where += ", into " + enginebin.CachePath(f.CacheRoot)
		}
		fmt.Fprintf(stdout, "%s\t%s\n", enginebin.Npm, where)
		return exitOK
	default:
		return fail(err)
	}
	where := src.Path
	if src.Kind == enginebin.Embedded {
		where = "built into this binary"
	}
	fmt.Fprintf(stdout, "%s\t%s\n", src.Kind, where)
	return exitOK
}

// engineVerify hashes every engine binary present, one line each:
// SOURCE<TAB>WHERE<TAB>SHA256<TAB>ok|MISMATCH (or the read error); then
// checks the compiled code in cacheDir (see verifyCompiled).
func engineVerify(cacheDir string, stdout io.Writer, fail func(error) int) int {
	f := enginebin.DefaultFinder()
	fmt.Fprintf(stdout, "pinned\tquickjs-wasi@%s\t%s\n", enginebin.PackageVersion, enginebin.SHA256)
	present, bad := 0, 0
	report := func(kind enginebin.Kind, where string, b []byte, err error) {
		present++
		switch {
		case err != nil:
			bad++
			fmt.Fprintf(stdout, "%s\t%s\t-\t%v\n", kind, where, err)
		case enginebin.Verify(b, enginebin.Source{}) != nil:
			bad++
			fmt.Fprintf(stdout, "%s\t%s\t%s\tMISMATCH\n", kind, where, enginebin.Sum(b))
		default:
			fmt.Fprintf(stdout, "%s\t%s\t%s\tok\n", kind, where, enginebin.Sum(b))
		}
	}
	if len(f.Embedded) > 0 {
		report(enginebin.Embedded, "built into this binary", f.Embedded, nil)
	}
	if f.EnvPath != "" {
		b, err := os.ReadFile(f.EnvPath)
		report(enginebin.Env, f.EnvPath, b, err)
	}
	if f.CacheRoot != "" {
		path := enginebin.CachePath(f.CacheRoot)
		b, err := os.ReadFile(path)
		if !errors.Is(err, fs.ErrNotExist) {
			report(enginebin.Cache, path, b, err)
		}
	}
	var errs []error
	switch {
	case present == 0:
		errs = append(errs, errors.New("no engine binary present; run: codemode engine install"))
	case bad > 0:
		errs = append(errs, fmt.Errorf("%d of %d engine binaries are not the pinned build", bad, present))
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
