package enginebin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// pinned returns the real engine, resolved as the sandbox resolves it
// (embedded under the Makefile's tag, else env, cache or npm).
func pinned(t *testing.T) []byte {
	t.Helper()
	b, _, err := Resolve(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var npmCheck struct {
	once sync.Once
	path string
	skip string
}

// needNpm returns the npm executable, or skips the test when npm is not
// installed or cannot reach the registry. Reachability is asked of npm
// itself (npm view), apart from the code under test, so a broken fetch in
// FetchNpm fails instead of skipping.
func needNpm(t *testing.T) string {
	t.Helper()
	npmCheck.once.Do(func() {
		p, err := exec.LookPath("npm")
		if err != nil {
			npmCheck.skip = "npm is not on PATH"
			return
		}
		out, err := exec.Command(p, "view", "--json", "quickjs-wasi@"+PackageVersion, "dist.integrity").Output()
		if err != nil {
			npmCheck.skip = "npm cannot reach the registry: " + err.Error()
			return
		}
		var integrity string
		if json.Unmarshal(out, &integrity) == nil && integrity != Integrity {
			// Not a skip: the registry disagrees with the pin.
			npmCheck.skip = "FAIL registry integrity " + integrity + ", pinned " + Integrity
			return
		}
		npmCheck.path = p
	})
	if strings.HasPrefix(npmCheck.skip, "FAIL ") {
		t.Fatal(npmCheck.skip[5:])
	}
	if npmCheck.skip != "" {
		t.Skip(npmCheck.skip)
	}
	return npmCheck.path
}

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

func TestSourceOrder(t *testing.T) {
	good := pinned(t)
	dir := t.TempDir()
	envFile := writeFile(t, filepath.Join(dir, "env", "quickjs.wasm"), good)
	cacheRoot := filepath.Join(dir, "cache")
	writeFile(t, CachePath(cacheRoot), good)
	emptyRoot := filepath.Join(dir, "empty")
	for _, tc := range []struct {
		name string
		f    Finder
		want Source
	}{
		{"embedded first", Finder{Embedded: good, EnvPath: envFile, CacheRoot: cacheRoot}, Source{Kind: Embedded}},
		{"env before cache", Finder{EnvPath: envFile, CacheRoot: cacheRoot}, Source{Kind: Env, Path: envFile}},
		{"cache", Finder{CacheRoot: cacheRoot}, Source{Kind: Cache, Path: CachePath(cacheRoot)}},
		{"cache before npm", Finder{CacheRoot: cacheRoot, Npm: filepath.Join(dir, "no-such-npm")}, Source{Kind: Cache, Path: CachePath(cacheRoot)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, src, err := tc.f.Find(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if src != tc.want {
				t.Errorf("got source %v, want %v", src, tc.want)
			}
			if !bytes.Equal(b, good) {
				t.Errorf("got %d bytes, want the pinned %d", len(b), len(good))
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		_, _, err := Finder{CacheRoot: emptyRoot}.Find(context.Background())
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
		msg := err.Error()
		for _, want := range []string{EnvWasm, CachePath(emptyRoot), "npm is not on PATH"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q does not mention %q", msg, want)
			}
		}
		if !strings.HasSuffix(msg, InstallCommand()) {
			t.Errorf("message %q does not end with the fix %q", msg, InstallCommand())
		}
	})
}

func TestMismatchPerSource(t *testing.T) {
	good := pinned(t)
	bad := corrupt(good)
	dir := t.TempDir()
	badFile := writeFile(t, filepath.Join(dir, "bad.wasm"), bad)
	badCache := filepath.Join(dir, "badcache")
	writeFile(t, CachePath(badCache), bad)
	goodCache := filepath.Join(dir, "goodcache")
	writeFile(t, CachePath(goodCache), good)
	for _, tc := range []struct {
		name        string
		find        func(context.Context) ([]byte, Source, error)
		want        Source // the source the mismatch names
		unavailable bool   // also ErrUnavailable: no other source had it
	}{
		{"host", func(ctx context.Context) ([]byte, Source, error) { return Resolve(ctx, bad) },
			Source{Kind: Host}, false},
		// A build that chose to embed bytes does not fall back to others.
		{"embedded", Finder{Embedded: bad, CacheRoot: goodCache}.Find,
			Source{Kind: Embedded}, false},
		// Nor does a file someone named in the environment.
		{"env", Finder{EnvPath: badFile, CacheRoot: goodCache}.Find,
			Source{Kind: Env, Path: badFile}, false},
		// A corrupt cache is refused; with nothing after it, the engine is unavailable.
		{"cache", Finder{CacheRoot: badCache}.Find,
			Source{Kind: Cache, Path: CachePath(badCache)}, true},
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
			if got := errors.Is(err, ErrUnavailable); got != tc.unavailable {
				t.Errorf("errors.Is(err, ErrUnavailable) = %v, want %v", got, tc.unavailable)
			}
		})
	}
	t.Run("env unreadable", func(t *testing.T) {
		missing := filepath.Join(dir, "missing.wasm")
		_, src, err := Finder{EnvPath: missing, CacheRoot: goodCache}.Find(context.Background())
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v, want ErrUnavailable wrapping ErrNotExist", err)
		}
		if want := (Source{Kind: Env, Path: missing}); src != want {
			t.Errorf("got source %v, want %v", src, want)
		}
	})
	t.Run("tarball", func(t *testing.T) {
		src := Source{Kind: File, Path: "x.tgz"}
		_, err := FromTarball([]byte("not a tarball"), src)
		var mm *MismatchError
		if !errors.As(err, &mm) || mm.Hash != "npm integrity" || mm.Source != src {
			t.Fatalf("got %v, want an npm integrity MismatchError naming %v", err, src)
		}
	})
}

func TestResolveHost(t *testing.T) {
	good := pinned(t)
	b, src, err := Resolve(context.Background(), good)
	if err != nil {
		t.Fatal(err)
	}
	if src.Kind != Host || &b[0] != &good[0] {
		t.Errorf("got source %v (same bytes: %v), want the host's own bytes", src, &b[0] == &good[0])
	}
}

func TestNpm(t *testing.T) {
	npm := needNpm(t)
	good := pinned(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		cache []byte // what the cache file holds first; nil for none
	}{
		{"empty cache", nil},
		{"corrupt cache is replaced", corrupt(good)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(dir, tc.name)
			if tc.cache != nil {
				writeFile(t, CachePath(root), tc.cache)
			}
			b, src, err := Finder{CacheRoot: root, Npm: npm}.Find(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if want := (Source{Kind: Npm, Path: CachePath(root)}); src != want {
				t.Errorf("got source %v, want %v", src, want)
			}
			if !bytes.Equal(b, good) {
				t.Errorf("npm gave %d bytes, want the pinned %d", len(b), len(good))
			}
			onDisk, err := os.ReadFile(CachePath(root))
			if err != nil || !bytes.Equal(onDisk, good) {
				t.Errorf("cache file after the fetch: %d bytes, %v; want the pinned engine", len(onDisk), err)
			}
			// The next process finds it in the cache.
			if _, src, err := (Finder{CacheRoot: root}).Find(context.Background()); err != nil || src.Kind != Cache {
				t.Errorf("second find: got %v, %v; want the cache", src, err)
			}
		})
	}
	t.Run("npm fails", func(t *testing.T) {
		// An npm that exits non-zero is a reason, not a crash.
		falseBin, err := exec.LookPath("false")
		if err != nil {
			t.Skip("no false command")
		}
		_, _, err = Finder{CacheRoot: filepath.Join(dir, "x"), Npm: falseBin}.Find(context.Background())
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "npm pack quickjs-wasi@"+PackageVersion) {
			t.Errorf("got %v, want ErrUnavailable naming the npm pack", err)
		}
	})
}

func TestInstallAtomic(t *testing.T) {
	good := pinned(t)
	root := t.TempDir()
	path := CachePath(root)
	// Readers racing installers see no file or the whole engine, never a
	// prefix: the write goes to a temporary name and is renamed.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var torn []int
	var mu sync.Mutex
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := os.ReadFile(path)
				if err == nil && !bytes.Equal(b, good) {
					mu.Lock()
					torn = append(torn, len(b))
					mu.Unlock()
				}
			}
		}()
	}
	var iw sync.WaitGroup
	for w := 0; w < 8; w++ {
		iw.Add(1)
		go func() {
			defer iw.Done()
			for i := 0; i < 10; i++ {
				if got, err := Install(root, good, Source{Kind: File, Path: "test"}); err != nil || got != path {
					t.Errorf("Install: got %q, %v; want %q", got, err, path)
				}
			}
		}()
	}
	iw.Wait()
	close(stop)
	wg.Wait()
	if len(torn) > 0 {
		t.Errorf("readers saw %d partial files (sizes %v), want none", len(torn), torn[:min(len(torn), 5)])
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "quickjs.wasm" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("cache directory holds %v, want only quickjs.wasm (no temporary files left)", names)
	}

	t.Run("wrong bytes are not written", func(t *testing.T) {
		_, err := Install(root, corrupt(good), Source{Kind: File, Path: "bad.wasm"})
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("got %v, want ErrMismatch", err)
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, good) {
			t.Error("a refused install changed the cache file")
		}
	})
}

// TestPin keeps the three pinned facts in step with package.json,
// package-lock.json and the installed package.
func TestPin(t *testing.T) {
	pkg, err := os.ReadFile("../../package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pj struct{ Dependencies map[string]string }
	if err := json.Unmarshal(pkg, &pj); err != nil {
		t.Fatal(err)
	}
	if got := pj.Dependencies["quickjs-wasi"]; got != PackageVersion {
		t.Errorf("package.json pins quickjs-wasi %q, want PackageVersion %q", got, PackageVersion)
	}
	lock, err := os.ReadFile("../../package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var pl struct {
		Packages map[string]struct{ Version, Integrity string }
	}
	if err := json.Unmarshal(lock, &pl); err != nil {
		t.Fatal(err)
	}
	entry := pl.Packages["node_modules/quickjs-wasi"]
	if entry.Version != PackageVersion || entry.Integrity != Integrity {
		t.Errorf("package-lock.json has quickjs-wasi %s %s, want %s %s", entry.Version, entry.Integrity, PackageVersion, Integrity)
	}
	// After npm ci, the installed binary is the pinned one.
	if b, err := os.ReadFile("../../node_modules/quickjs-wasi/quickjs.wasm"); err == nil {
		if got := Sum(b); got != SHA256 {
			t.Errorf("node_modules/quickjs-wasi/quickjs.wasm SHA-256 %s, want %s", got, SHA256)
		}
	}
}

func TestInstallCommand(t *testing.T) {
	got := InstallCommand()
	// A test binary's main module is this one, at no released version.
	if want := "go run " + modulePath + "/cmd/codemode@latest engine install"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestNoWasm keeps this package free of WebAssembly: only internal/quickjs
// imports wazero.
func TestNoWasm(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	for _, tags := range []string{"", "codemode_embed"} {
		out, err := exec.Command(gobin, "list", "-tags", tags, "-deps", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		if strings.Contains(string(out), "wazero") {
			t.Errorf("tags %q: internal/enginebin depends on wazero:\n%s", tags, out)
		}
	}
}
