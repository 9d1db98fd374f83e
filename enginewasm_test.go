package codemode

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/codemode-go/codemode/internal/enginebin"
	secretkey "github.com/codemode-go/codemode/internal/secret"
)

// TestEngineWasm covers Options.EngineWasm: the host's bytes are used when
// they are the pinned build and refused with ErrEngineMismatch otherwise,
// whether or not an engine for the CacheDir was already compiled from
// another source (engines are shared by CacheDir).
func TestEngineWasm(t *testing.T) {
	good, _, err := enginebin.Resolve(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0xff
	t.Setenv(secretkey.EnvConfigDir, t.TempDir()) // where the CacheDir's key is made
	fresh := t.TempDir()                          // a CacheDir no engine was compiled for yet
	for _, tc := range []struct {
		name     string
		cacheDir string
		wasm     []byte
		mismatch bool
	}{
		{"pinned bytes, new engine", fresh, good, false},
		{"pinned bytes, shared engine", "", good, false},
		{"wrong bytes, shared engine", "", bad, true},
		{"wrong bytes, new engine", t.TempDir(), bad, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cacheDir == "" {
				mustNew(t, Options{}) // compiles (or reuses) the engine for no CacheDir
			}
			rt, err := New(Options{CacheDir: tc.cacheDir, EngineWasm: tc.wasm})
			if tc.mismatch {
				if !errors.Is(err, ErrEngineMismatch) || errors.Is(err, ErrEngineUnavailable) {
					t.Fatalf("got %v, want ErrEngineMismatch", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			res, err := rt.Execute(context.Background(), "return 1 + 1")
			if err != nil || !res.OK || string(res.Value) != "2" {
				t.Errorf("got %s, %v, %v; want 2", res.Value, res.Error, err)
			}
		})
	}
}
