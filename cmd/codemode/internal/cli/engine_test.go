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
// cache root, no $CODEMODE_ENGINE_WASM, and a PATH holding only dir. It
// returns the cache root and the pinned engine bytes.
func engineEnv(t *testing.T, path string) (string, []byte) {
	t.Helper()
	good, _, err := enginebin.Resolve(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	t.Setenv(enginebin.EnvCacheDir, root)
	t.Setenv(enginebin.EnvWasm, "")
	t.Setenv("PATH", path)
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

// builtIn reports whether this test binary carries the engine (make test
// builds with -tags codemode_embed); it then resolves before env and cache.
func builtIn() bool { return len(enginebin.DefaultFinder().Embedded) > 0 }

func TestEngineUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		exit int
		out  string // stdout contains
	}{
		{[]string{"engine"}, exitUsage, ""},
		{[]string{"engine", "help"}, exitOK, "codemode engine install [FILE]"},
		{[]string{"engine", "-h"}, exitOK, "CODEMODE_ENGINE_WASM"},
		{[]string{"engine", "frobnicate"}, exitUsage, ""},
		{[]string{"engine", "path", "extra"}, exitUsage, ""},
		{[]string{"engine", "verify", "--fast"}, exitUsage, ""},
		{[]string{"engine", "install", "a", "b"}, exitUsage, ""},
		{[]string{"engine", "install", "-h"}, exitOK, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := runCLI(t, "", tc.args...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, tc.exit, errs)
			}
			if !strings.Contains(out, tc.out) {
				t.Errorf("stdout %q, want it to contain %q", out, tc.out)
			}
		})
	}
}

func TestEngineInstall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cache  func(good []byte) []byte // the cache file before; nil for none
		file   func(good []byte) []byte // FILE's contents; nil for no FILE
		exit   int
		errs   string // stderr contains
		filled bool   // the cache holds the engine afterwards
	}{
		{name: "file", file: func(g []byte) []byte { return g }, filled: true},
		{name: "file replaces a corrupt cache", cache: flip, file: func(g []byte) []byte { return g }, filled: true},
		{name: "wrong file", file: flip, exit: exitFailure, errs: "is not the pinned engine build"},
		{name: "wrong tarball", file: func([]byte) []byte { return []byte{0x1f, 0x8b, 8, 0} }, exit: exitFailure, errs: "npm integrity"},
		{name: "no npm", exit: exitFailure, errs: "npm is not on PATH"},
		{name: "installed already, no npm needed", cache: func(g []byte) []byte { return g }, filled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, good := engineEnv(t, t.TempDir())
			cache := enginebin.CachePath(root)
			if tc.cache != nil {
				put(t, cache, tc.cache(good))
			}
			args := []string{"engine", "install"}
			if tc.file != nil {
				args = append(args, put(t, filepath.Join(t.TempDir(), "engine.bin"), tc.file(good)))
			}
			code, out, errs := runCLI(t, "", args...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, tc.exit, errs)
			}
			if !strings.Contains(errs, tc.errs) {
				t.Errorf("stderr %q, want it to contain %q", errs, tc.errs)
			}
			b, err := os.ReadFile(cache)
			if got := err == nil && enginebin.Sum(b) == enginebin.SHA256; got != tc.filled {
				t.Errorf("cache holds the engine: %v, want %v", got, tc.filled)
			}
			if tc.filled && strings.TrimSpace(out) != cache {
				t.Errorf("stdout %q, want the cache path %q", out, cache)
			}
		})
	}
}

func TestEnginePath(t *testing.T) {
	// An "npm" that records being run: path must only look for it.
	npmDir := t.TempDir()
	ran := filepath.Join(t.TempDir(), "npm-ran")
	if runtime.GOOS != "windows" {
		put(t, filepath.Join(npmDir, "npm"), []byte("#!/bin/sh\ntouch '"+ran+"'\nexit 1\n"))
		if err := os.Chmod(filepath.Join(npmDir, "npm"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, root string, good []byte) // runs after engineEnv
		npm   bool
		exit  int
		kind  enginebin.Kind // the first field printed
	}{
		{name: "cache", setup: func(t *testing.T, root string, good []byte) { put(t, enginebin.CachePath(root), good) }, kind: enginebin.Cache},
		{name: "env", setup: func(t *testing.T, root string, good []byte) {
			t.Setenv(enginebin.EnvWasm, put(t, filepath.Join(t.TempDir(), "q.wasm"), good))
		}, kind: enginebin.Env},
		{name: "npm, not fetched", npm: true, kind: enginebin.Npm},
		{name: "nothing", exit: exitFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.npm && runtime.GOOS == "windows" {
				t.Skip("the recording npm is a shell script")
			}
			path := t.TempDir()
			if tc.npm {
				path = npmDir
			}
			root, good := engineEnv(t, path)
			if tc.setup != nil {
				tc.setup(t, root, good)
			}
			exit, kind := tc.exit, tc.kind
			if builtIn() {
				exit, kind = exitOK, enginebin.Embedded
			}
			code, out, errs := runCLI(t, "", "engine", "path")
			if code != exit {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exit, out, errs)
			}
			if exit == exitOK && !strings.HasPrefix(out, kind.String()+"\t") {
				t.Errorf("stdout %q, want source %s first", out, kind)
			}
			if exit != exitOK && !strings.Contains(errs, "engine install") {
				t.Errorf("stderr %q, want the install command", errs)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("engine path ran npm")
			}
		})
	}
}

func TestEngineVerify(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, root string, good []byte)
		exit  int
		lines []string // stdout contains each
	}{
		{name: "good cache", setup: func(t *testing.T, root string, good []byte) { put(t, enginebin.CachePath(root), good) },
			lines: []string{"cache\t", "\t" + enginebin.SHA256 + "\tok"}},
		{name: "corrupt cache", setup: func(t *testing.T, root string, good []byte) { put(t, enginebin.CachePath(root), flip(good)) },
			exit: exitFailure, lines: []string{"cache\t", "\tMISMATCH"}},
		{name: "unreadable env", setup: func(t *testing.T, root string, good []byte) {
			t.Setenv(enginebin.EnvWasm, filepath.Join(root, "missing.wasm"))
		}, exit: exitFailure, lines: []string{"env\t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, good := engineEnv(t, t.TempDir())
			tc.setup(t, root, good)
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
			if builtIn() && !strings.Contains(out, "embedded\tbuilt into this binary\t"+enginebin.SHA256+"\tok") {
				t.Errorf("stdout %q, want the built-in copy reported ok", out)
			}
		})
	}
	t.Run("nothing present", func(t *testing.T) {
		if builtIn() {
			t.Skip("this binary carries the engine")
		}
		engineEnv(t, t.TempDir())
		if code, _, errs := runCLI(t, "", "engine", "verify"); code != exitFailure || !strings.Contains(errs, "engine install") {
			t.Errorf("exit %d, stderr %q; want %d and the install command", code, errs, exitFailure)
		}
	})
}

// TestEngineVerifyCompiled covers the compiled engine cache: each entry is
// reported, and one that fails its MAC, or a directory others can write,
// fails verify.
func TestEngineVerifyCompiled(t *testing.T) {
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
			root, good := engineEnv(t, t.TempDir())
			dir := defaultCacheDir()
			if tc.flag {
				dir = filepath.Join(t.TempDir(), "compiled")
			}
			s, err := sandbox.New(context.Background(), sandbox.Options{CacheDir: dir, EngineWasm: good})
			if err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			put(t, enginebin.CachePath(root), good) // so a binary is present without the built-in one
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
