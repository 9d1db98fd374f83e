package quickjs

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func newTestEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	ctx := context.Background()
	e, err := NewEngine(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(ctx) })
	return e
}

func newTestInstance(t testing.TB, e *Engine, cfg InstanceConfig) *Instance {
	t.Helper()
	in, err := e.NewInstance(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in
}

// evalString evaluates code and returns its value as a string, or the
// thrown value's text prefixed with "throw: ".
func evalString(t testing.TB, in *Instance, code string) (string, error) {
	t.Helper()
	v, err := in.Eval(code, "test.js", EvalStrict)
	if err != nil {
		var exc *Exception
		if errors.As(err, &exc) {
			s, _ := in.String(exc.Value)
			in.Free(exc.Value)
			return "throw: " + s, err
		}
		return "", err
	}
	defer in.Free(v)
	return in.String(v)
}

func TestPinnedEngine(t *testing.T) {
	if got := WasmSHA256(); got != wasmSHA256 {
		t.Fatalf("embedded quickjs.wasm SHA-256 = %s, want %s", got, wasmSHA256)
	}
	e := newTestEngine(t, Config{})
	if got, want := e.Version(), "0.18.0"; got != want {
		t.Errorf("QuickJS-NG version = %q, want %q", got, want)
	}
	// The npm package the Makefile copies from must be the pinned one.
	if b, err := os.ReadFile("../../node_modules/quickjs-wasi/package.json"); err == nil {
		if !strings.Contains(string(b), `"version": "`+PackageVersion+`"`) {
			t.Errorf("node_modules/quickjs-wasi is not version %s", PackageVersion)
		}
	}
}

func TestEval(t *testing.T) {
	e := newTestEngine(t, Config{})
	in := newTestInstance(t, e, InstanceConfig{})
	got, err := evalString(t, in, `[1, 2, 3].map((x) => x * 2).join(",") + " " + new Date(0).getTimezoneOffset()`)
	if err != nil {
		t.Fatal(err)
	}
	if want := "2,4,6 0"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
