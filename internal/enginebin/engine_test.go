package enginebin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func corrupt(b []byte) []byte {
	c := bytes.Clone(b)
	c[len(c)/2] ^= 0xff
	return c
}

// TestEmbedded checks what every build carries: the pinned engine, used
// when neither the host nor the environment supplies one.
func TestEmbedded(t *testing.T) {
	if got := Sum(embedded); got != SHA256 {
		t.Fatalf("embedded quickjs.wasm SHA-256 %s, want %s", got, SHA256)
	}
	if os.Getenv(EnvWasm) != "" {
		t.Skipf("$%s is set", EnvWasm)
	}
	if _, src, err := Resolve(context.Background(), nil); err != nil || src.Kind != Embedded {
		t.Errorf("Resolve: got %v, %v; want the embedded copy", src, err)
	}
}

func TestSourceOrder(t *testing.T) {
	envFile := writeFile(t, filepath.Join(t.TempDir(), "quickjs.wasm"), embedded)
	for _, tc := range []struct {
		name string
		f    Finder
		want Source
	}{
		{"env before embedded", Finder{EnvPath: envFile, Embedded: embedded}, Source{Kind: Env, Path: envFile}},
		{"embedded", Finder{Embedded: embedded}, Source{Kind: Embedded}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, src, err := tc.f.Find(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if src != tc.want {
				t.Errorf("got source %v, want %v", src, tc.want)
			}
			if !bytes.Equal(b, embedded) {
				t.Errorf("got %d bytes, want the pinned %d", len(b), len(embedded))
			}
		})
	}
	t.Run("host first", func(t *testing.T) {
		host := bytes.Clone(embedded)
		b, src, err := Resolve(context.Background(), host)
		if err != nil {
			t.Fatal(err)
		}
		if src.Kind != Host || &b[0] != &host[0] {
			t.Errorf("got source %v (same bytes: %v), want the host's own bytes", src, &b[0] == &host[0])
		}
	})
}

func TestMismatchPerSource(t *testing.T) {
	bad := corrupt(embedded)
	dir := t.TempDir()
	badFile := writeFile(t, filepath.Join(dir, "bad.wasm"), bad)
	for _, tc := range []struct {
		name string
		find func(context.Context) ([]byte, Source, error)
		want Source // the source the mismatch names
		fix  string // the message ends with the next step, which says this
	}{
		{"host", func(ctx context.Context) ([]byte, Source, error) { return Resolve(ctx, bad) },
			Source{Kind: Host}, "Options.EngineWasm nil"},
		// A file someone named does not fall back to the built-in copy.
		{"env", Finder{EnvPath: badFile, Embedded: embedded}.Find,
			Source{Kind: Env, Path: badFile}, "unset " + EnvWasm},
		{"embedded", Finder{Embedded: bad}.Find,
			Source{Kind: Embedded}, "unmodified copy of " + modulePath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _, err := tc.find(context.Background())
			var mm *MismatchError
			if !errors.As(err, &mm) || !errors.Is(err, ErrMismatch) {
				t.Fatalf("got %v, want a MismatchError", err)
			}
			if b != nil {
				t.Errorf("got %d bytes with the error, want none", len(b))
			}
			if mm.Source != tc.want {
				t.Errorf("mismatch names %v, want %v", mm.Source, tc.want)
			}
			if mm.Got != Sum(bad) || mm.Want != SHA256 {
				t.Errorf("got hashes %s/%s, want %s/%s", mm.Got, mm.Want, Sum(bad), SHA256)
			}
			if !strings.Contains(err.Error(), tc.fix) {
				t.Errorf("message %q does not give the next step (%q)", err, tc.fix)
			}
		})
	}
	t.Run("env unreadable", func(t *testing.T) {
		missing := filepath.Join(dir, "missing.wasm")
		_, src, err := Finder{EnvPath: missing, Embedded: embedded}.Find(context.Background())
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v, want ErrUnavailable wrapping ErrNotExist", err)
		}
		if want := (Source{Kind: Env, Path: missing}); src != want {
			t.Errorf("got source %v, want %v", src, want)
		}
		if !strings.Contains(err.Error(), "unset "+EnvWasm) {
			t.Errorf("message %q does not say to unset %s", err, EnvWasm)
		}
	})
}

// TestProvenance keeps PROVENANCE, which scripts/engine-fetch.sh reads,
// in step with pin.go, and the licence beside the binary.
func TestProvenance(t *testing.T) {
	f, err := os.Open("PROVENANCE")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("PROVENANCE line %q is not KEY: VALUE", line)
		}
		got[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"package":   "quickjs-wasi",
		"version":   PackageVersion,
		"integrity": Integrity,
		"sha256":    SHA256,
		"file":      "package/quickjs.wasm",
		"tarball":   "https://registry.npmjs.org/quickjs-wasi/-/quickjs-wasi-" + PackageVersion + ".tgz",
	} {
		if got[k] != want {
			t.Errorf("PROVENANCE %s: %q, want %q", k, got[k], want)
		}
	}
	lic, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(lic, []byte("MIT License")) {
		t.Errorf("LICENSE starts %q, want the package's MIT licence", lic[:min(len(lic), 40)])
	}
}

// TestCommitted checks that git tracks the binary and the files beside
// it: a module download holds what the repository holds, so a file that
// is only on this disk would build here and fail for everyone else.
func TestCommitted(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not on PATH")
	}
	if out, err := exec.Command(git, "rev-parse", "--is-inside-work-tree").Output(); err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Skip("not in a git work tree")
	}
	files := []string{"quickjs.wasm", "LICENSE", "PROVENANCE"}
	out, err := exec.Command(git, append([]string{"ls-files", "--error-unmatch", "--"}, files...)...).CombinedOutput()
	if err != nil {
		t.Errorf("git ls-files: %v\n%s\nwant all of %v committed", err, out, files)
	}
	out, err = exec.Command(git, "ls-files", "--eol", "quickjs.wasm").Output()
	if err == nil && !strings.Contains(string(out), "-text") {
		t.Errorf("git ls-files --eol: %s; want quickjs.wasm treated as binary", out)
	}
}

// TestNoWasm keeps this package free of WebAssembly: only internal/quickjs
// imports wazero.
func TestNoWasm(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "wazero") {
		t.Errorf("internal/enginebin depends on wazero:\n%s", out)
	}
}
