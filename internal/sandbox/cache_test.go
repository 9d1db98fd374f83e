package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/codemode-go/codemode/internal/quickjs"
	"github.com/codemode-go/codemode/internal/secret"
)

// TestCacheKey covers where the key signing a CacheDir comes from when
// Options.CacheKey is nil.
func TestCacheKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    func(t *testing.T) // sets the configuration directory
		signed bool               // the cache directory gets a signed entry
		unsafe bool               // New fails with secret.ErrUnsafe
	}{
		{name: "per-user key", env: func(t *testing.T) { t.Setenv(secret.EnvConfigDir, t.TempDir()) }, signed: true},
		// No configuration directory, no key: the engine compiles in
		// memory and the cache directory stays untouched.
		{name: "no configuration directory", env: func(t *testing.T) {
			for _, v := range []string{secret.EnvConfigDir, "HOME", "XDG_CONFIG_HOME", "AppData", "home"} {
				t.Setenv(v, "")
			}
			if _, err := secret.Root(); err == nil {
				t.Skip("this system has a configuration directory without HOME")
			}
		}},
		{name: "key file open to others", unsafe: true, env: func(t *testing.T) {
			if runtime.GOOS == "windows" {
				t.Skip("Windows keeps who may read a file in its ACL, not its mode bits")
			}
			dir := t.TempDir()
			t.Setenv(secret.EnvConfigDir, dir)
			if err := os.WriteFile(filepath.Join(dir, "cache.key"), bytes.Repeat([]byte{1}, 32), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir, "cache.key"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env(t)
			cacheDir := filepath.Join(t.TempDir(), "cache")
			s, err := New(context.Background(), Options{CacheDir: cacheDir})
			if tc.unsafe {
				if !errors.Is(err, secret.ErrUnsafe) {
					t.Fatalf("got %v, want secret.ErrUnsafe", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if res, err := s.Run(context.Background(), Request{Program: `6 * 7`}); err != nil || string(res.Value) != "42" {
				t.Fatalf("got %s, %v; want 42", res.Value, err)
			}
			if !tc.signed {
				if _, err := os.Stat(cacheDir); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("cache directory: %v, want it never made", err)
				}
				return
			}
			key, file, err := CacheKey()
			if err != nil {
				t.Fatal(err)
			}
			if root, _ := secret.Root(); filepath.Dir(file) != root {
				t.Errorf("key file %s is not in %s", file, root)
			}
			entries, err := quickjs.CheckCache(cacheDir, key)
			if err != nil || len(entries) != 1 || entries[0].Err != nil {
				t.Errorf("got %+v, %v; want one entry signed with the per-user key", entries, err)
			}
		})
	}
}
