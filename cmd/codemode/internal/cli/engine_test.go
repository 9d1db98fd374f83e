package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/codemode-go/codemode/internal/quickjs"
	"github.com/codemode-go/codemode/internal/sandbox"
)

// engineEnv points the engine's environment at fresh directories: an empty
// cache root and no $CODEMODE_ENGINE_WASM. It returns the cache root and
// the pinned engine bytes.
func engineEnv(t *testing.T) (string, []byte) {
	t.Helper()
	t.Setenv(enginebin.EnvWasm, "")
	good, _, err := enginebin.Resolve(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	t.Setenv(enginebin.EnvCacheDir, root)
	return root, good
}

func put(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func flip(b []byte) []byte {
	c := bytes.Clone(b)
	c[len(c)/2] ^= 0xff
	return c
}

func TestEngineUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		exit int
		out  string // stdout contains
		errs string // stderr contains
	}{
		{[]string{"engine"}, exitUsage, "", ""},
		{[]string{"engine", "help"}, exitOK, "codemode engine verify", ""},
		{[]string{"engine", "-h"}, exitOK, "CODEMODE_ENGINE_WASM", ""},
		{[]string{"engine", "frobnicate"}, exitUsage, "", ""},
		{[]string{"engine", "path", "extra"}, exitUsage, "", ""},
		{[]string{"engine", "verify", "--fast"}, exitUsage, "", ""},
		// Scripts that installed the engine before it was built in
		// still succeed, and are told why there is nothing to do.
		{[]string{"engine", "install"}, exitOK, "", "built into codemode"},
		{[]string{"engine", "install", "quickjs.wasm"}, exitOK, "", "built into codemode"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runCLI(t, "", tc.args...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, tc.exit, errs)
			}
			if !strings.Contains(out, tc.out) {
				t.Errorf("stdout %q, want it to contain %q", out, tc.out)
			}
			if !strings.Contains(errs, tc.errs) {
				t.Errorf("stderr %q, want it to contain %q", errs, tc.errs)
			}
		})
	}
}

func TestEnginePath(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(t *testing.T, good []byte) string // $CODEMODE_ENGINE_WASM; nil for unset
		exit int
		out  string // stdout starts with
		errs string // stderr contains
	}{
		{name: "built in", out: "embedded\tbuilt into this binary\n"},
		{name: "env", env: func(t *testing.T, good []byte) string { return put(t, filepath.Join(t.TempDir(), "q.wasm"), good) },
			out: "env\t"},
		{name: "env wrong", env: func(t *testing.T, good []byte) string {
			return put(t, filepath.Join(t.TempDir(), "q.wasm"), flip(good))
		},
			exit: exitFailure, errs: "unset " + enginebin.EnvWasm},
		{name: "env missing", env: func(t *testing.T, good []byte) string { return filepath.Join(t.TempDir(), "missing.wasm") },
			exit: exitFailure, errs: "unset " + enginebin.EnvWasm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, good := engineEnv(t)
			if tc.env != nil {
				t.Setenv(enginebin.EnvWasm, tc.env(t, good))
			}
			code, out, errs := runCLI(t, "", "engine", "path")
			if code != tc.exit {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.exit, out, errs)
			}
			if !strings.HasPrefix(out, tc.out) {
				t.Errorf("stdout %q, want it to start with %q", out, tc.out)
			}
			if !strings.Contains(errs, tc.errs) {
				t.Errorf("stderr %q, want it to contain %q", errs, tc.errs)
			}
		})
	}
}

func TestEngineVerify(t *testing.T) {
	builtIn := "embedded\tbuilt into this binary\t" + enginebin.SHA256 + "\tok\n"
	for _, tc := range []struct {
		name  string
		env   func(t *testing.T, good []byte) string // $CODEMODE_ENGINE_WASM; nil for unset
		exit  int
		lines []string // stdout contains each
	}{
		{name: "built in", lines: []string{builtIn}},
		{name: "good env", env: func(t *testing.T, good []byte) string { return put(t, filepath.Join(t.TempDir(), "q.wasm"), good) },
			lines: []string{builtIn, "env\t", "\t" + enginebin.SHA256 + "\tok"}},
		{name: "corrupt env", env: func(t *testing.T, good []byte) string {
			return put(t, filepath.Join(t.TempDir(), "q.wasm"), flip(good))
		},
			exit: exitFailure, lines: []string{builtIn, "env\t", "\tMISMATCH"}},
		{name: "unreadable env", env: func(t *testing.T, good []byte) string { return filepath.Join(t.TempDir(), "missing.wasm") },
			exit: exitFailure, lines: []string{builtIn, "env\t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, good := engineEnv(t)
			if tc.env != nil {
				t.Setenv(enginebin.EnvWasm, tc.env(t, good))
			}
			code, out, errs := runCLI(t, "", "engine", "verify")
			if code != tc.exit {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.exit, out, errs)
			}
			if !strings.HasPrefix(out, "pinned\tquickjs-wasi@"+enginebin.PackageVersion+"\t"+enginebin.SHA256+"\n") {
				t.Errorf("stdout %q, want the pinned hash first", out)
			}
			for _, want := range tc.lines {
				if !strings.Contains(out, want) {
					t.Errorf("stdout %q, want it to contain %q", out, want)
				}
			}
			if code != exitOK && !strings.Contains(errs, "unset "+enginebin.EnvWasm) {
				t.Errorf("stderr %q, want the next step", errs)
			}
		})
	}
}

// TestEngineVerifyCompiled covers the compiled engine cache: each entry is
// reported, and one that fails its MAC, or a directory others can write,
// fails verify.
func TestEngineVerifyCompiled(t *testing.T) {
	// The engine is compiled once, the slow step; each case checks a copy
	// (an entry's MAC covers its name and bytes, not its directory).
	compiled := filepath.Join(t.TempDir(), "compiled")
	s, err := sandbox.New(context.Background(), sandbox.Options{CacheDir: compiled})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	for _, tc := range []struct {
		name   string
		flag   bool // check a directory given by --cache-dir, not the default
		unix   bool // the check exists on Unix only
		change func(t *testing.T, dir, entry string)
		exit   int
		status string // the entry's line ends with it
	}{
		{name: "clean", status: "ok"},
		{name: "clean, --cache-dir", flag: true, status: "ok"},
		{name: "tampered", change: func(t *testing.T, _, entry string) { put(t, entry, flip(read(t, entry))) },
			exit: exitFailure, status: "MISMATCH"},
		{name: "tampered, --cache-dir", flag: true, change: func(t *testing.T, _, entry string) { put(t, entry, flip(read(t, entry))) },
			exit: exitFailure, status: "MISMATCH"},
		{name: "whole file replaced", change: func(t *testing.T, _, entry string) { put(t, entry, make([]byte, len(read(t, entry)))) },
			exit: exitFailure, status: "MISMATCH"},
		// A run would compile it afresh rather than load it.
		{name: "unsigned", change: func(t *testing.T, _, entry string) {
			if err := os.Remove(entry + ".hmac"); err != nil {
				t.Fatal(err)
			}
		}, status: "UNSIGNED"},
		{name: "directory writable by others", unix: true, change: func(t *testing.T, dir, _ string) {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, exit: exitFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.unix && runtime.GOOS == "windows" {
				t.Skip("Windows keeps who may write a file in its ACL, not its mode bits")
			}
			engineEnv(t)
			dir := defaultCacheDir()
			if tc.flag {
				dir = filepath.Join(t.TempDir(), "compiled")
			}
			if err := os.CopyFS(dir, os.DirFS(compiled)); err != nil {
				t.Fatal(err)
			}
			key, _, err := sandbox.CacheKey()
			if err != nil {
				t.Fatal(err)
			}
			entries, err := quickjs.CheckCache(dir, key)
			if err != nil || len(entries) != 1 {
				t.Fatalf("compiled cache: %+v, %v; want one entry", entries, err)
			}
			entry := entries[0].Path
			if tc.change != nil {
				tc.change(t, dir, entry)
			}
			args := []string{"engine", "verify"}
			if tc.flag {
				args = append(args, "--cache-dir", dir)
			}
			code, out, errs := runCLI(t, "", args...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.exit, out, errs)
			}
			want := "compiled\t" + entry + "\t-\t" + tc.status + "\n"
			if tc.status == "" {
				want = "compiled\t" + dir + "\t-\t" // the directory's problem
			}
			if !strings.Contains(out, want) {
				t.Errorf("stdout %q, want it to contain %q", out, want)
			}
			if code != exitOK && !strings.Contains(errs, dir) && !strings.Contains(errs, "cache.key") {
				t.Errorf("stderr %q names neither the cache nor the key", errs)
			}
		})
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
