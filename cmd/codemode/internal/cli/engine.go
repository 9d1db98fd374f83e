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

	"github.com/codemode-go/codemode/internal/engine"
)

var engineUsage = `Usage:
  codemode engine install [FILE]   put the pinned engine in the per-user cache: fetch it
                                   with npm, or copy FILE (quickjs.wasm, or the npm tarball
                                   quickjs-wasi-` + engine.PackageVersion + `.tgz) for hosts without a network
  codemode engine path             print where the engine resolves from: SOURCE<TAB>WHERE
  codemode engine verify           check every engine binary present against the pinned hash

The engine is QuickJS-NG from npm quickjs-wasi@` + engine.PackageVersion + `, SHA-256
` + engine.SHA256 + `.
It is resolved at run time, in order: the copy built in with -tags
codemode_embed, the file $` + engine.EnvWasm + ` names, the per-user cache
($` + engine.EnvCacheDir + ` or the user cache directory, then
codemode/engine/SHA256/quickjs.wasm), and npm pack when npm is on PATH,
which fills the cache. None of these subcommands takes flags.
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
		fmt.Fprintf(stderr, "codemode engine: unknown subcommand %q\n\n%s", name, engineUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("codemode engine "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, engineUsage) }
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	maxArgs := 0
	if name == "install" {
		maxArgs = 1
	}
	if fs.NArg() > maxArgs {
		fmt.Fprintf(stderr, "codemode engine %s: unexpected arguments %q\n", name, fs.Args())
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "codemode engine %s: %v\n", name, err)
		return exitFailure
	}
	switch name {
	case "install":
		return engineInstall(fs.Arg(0), stdout, stderr, fail)
	case "path":
		return enginePath(stdout, fail)
	}
	return engineVerify(stdout, fail)
}

// engineInstall writes the engine to the cache from FILE, or from npm when
// file is empty, and prints the cache file's path.
func engineInstall(file string, stdout, stderr io.Writer, fail func(error) int) int {
	root, err := engine.CacheRoot()
	if err != nil {
		return fail(fmt.Errorf("no per-user cache directory (%v): set $%s", err, engine.EnvCacheDir))
	}
	var b []byte
	src := engine.Source{Kind: engine.File, Path: file}
	if file != "" {
		if b, err = os.ReadFile(file); err != nil {
			return fail(err)
		}
		// An npm tarball is gzip; a wasm module starts with "\0asm".
		if bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			if b, err = engine.FromTarball(b, src); err != nil {
				return fail(err)
			}
		}
	} else {
		path := engine.CachePath(root)
		if cur, err := os.ReadFile(path); err == nil && engine.Verify(cur, engine.Source{}) == nil {
			fmt.Fprintln(stdout, path)
			return exitOK
		}
		npm := engine.DefaultFinder().Npm
		if npm == "" {
			return fail(fmt.Errorf("npm is not on PATH: install Node.js, or run `npm pack quickjs-wasi@%s` on a machine that has it and then `codemode engine install quickjs-wasi-%[1]s.tgz` here", engine.PackageVersion))
		}
		fmt.Fprintf(stderr, "fetching quickjs-wasi@%s with npm...\n", engine.PackageVersion)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		src = engine.Source{Kind: engine.Npm}
		if b, err = engine.FetchNpm(ctx, npm); err != nil {
			return fail(err)
		}
	}
	path, err := engine.Install(root, b, src)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout, path)
	return exitOK
}

// enginePath prints the source a program would resolve the engine from.
// It never fetches: when only npm would do, it says so.
func enginePath(stdout io.Writer, fail func(error) int) int {
	f := engine.DefaultFinder()
	npm := f.Npm
	f.Npm = ""
	_, src, err := f.Find(context.Background())
	switch {
	case err == nil:
	case errors.Is(err, engine.ErrUnavailable) && npm != "" && src.Kind == 0:
		where := "npm pack quickjs-wasi@" + engine.PackageVersion + ", on first use"
		if f.CacheRoot != "" {
			where += ", into " + engine.CachePath(f.CacheRoot)
		}
		fmt.Fprintf(stdout, "%s\t%s\n", engine.Npm, where)
		return exitOK
	default:
		return fail(err)
	}
	where := src.Path
	if src.Kind == engine.Embedded {
		where = "built into this binary"
	}
	fmt.Fprintf(stdout, "%s\t%s\n", src.Kind, where)
	return exitOK
}

// engineVerify hashes every engine binary present, one line each:
// SOURCE<TAB>WHERE<TAB>SHA256<TAB>ok|MISMATCH (or the read error).
func engineVerify(stdout io.Writer, fail func(error) int) int {
	f := engine.DefaultFinder()
	fmt.Fprintf(stdout, "pinned\tquickjs-wasi@%s\t%s\n", engine.PackageVersion, engine.SHA256)
	present, bad := 0, 0
	report := func(kind engine.Kind, where string, b []byte, err error) {
		present++
		switch {
		case err != nil:
			bad++
			fmt.Fprintf(stdout, "%s\t%s\t-\t%v\n", kind, where, err)
		case engine.Verify(b, engine.Source{}) != nil:
			bad++
			fmt.Fprintf(stdout, "%s\t%s\t%s\tMISMATCH\n", kind, where, engine.Sum(b))
		default:
			fmt.Fprintf(stdout, "%s\t%s\t%s\tok\n", kind, where, engine.Sum(b))
		}
	}
	if len(f.Embedded) > 0 {
		report(engine.Embedded, "built into this binary", f.Embedded, nil)
	}
	if f.EnvPath != "" {
		b, err := os.ReadFile(f.EnvPath)
		report(engine.Env, f.EnvPath, b, err)
	}
	if f.CacheRoot != "" {
		path := engine.CachePath(f.CacheRoot)
		b, err := os.ReadFile(path)
		if !errors.Is(err, fs.ErrNotExist) {
			report(engine.Cache, path, b, err)
		}
	}
	switch {
	case present == 0:
		return fail(errors.New("no engine binary present; run: codemode engine install"))
	case bad > 0:
		return fail(fmt.Errorf("%d of %d engine binaries are not the pinned build", bad, present))
	}
	return exitOK
}
