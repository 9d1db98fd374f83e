package quickjs

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/codemode-go/codemode/internal/enginebin"
)

// testWasm is the engine as the sandbox gets it: embedded in tagged builds
// (make test), else from $CODEMODE_ENGINE_WASM, the cache or npm. Without
// any of them the tests fail with the error that says how to install it.
func testWasm(t testing.TB) []byte {
	t.Helper()
	b, _, err := enginebin.Resolve(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTestEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	ctx := context.Background()
	if cfg.Wasm == nil {
		cfg.Wasm = testWasm(t)
	}
	if cfg.CacheDir == "" {
		// Compiling is the slow step (seconds, ten times that under
		// -race), so engines whose tests are not about compiling or the
		// cache load what the first one compiled. Those tests name a
		// CacheDir of their own.
		cfg.CacheDir, cfg.CacheKey = sharedCacheDir(t), testCacheKey
	}
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
	e := newTestEngine(t, Config{})
	if got, want := e.Version(), "0.18.0"; got != want {
		t.Errorf("QuickJS-NG version = %q, want %q", got, want)
	}
}

func TestRefusesOtherBytes(t *testing.T) {
	good := testWasm(t)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 1
	for _, tc := range []struct {
		name string
		wasm []byte
	}{
		{"none", nil},
		{"one bit flipped", flipped},
		{"truncated", good[:len(good)-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEngine(context.Background(), Config{Wasm: tc.wasm})
			if !errors.Is(err, ErrWasmMismatch) {
				if e != nil {
					_ = e.Close(context.Background())
				}
				t.Fatalf("got %v, want ErrWasmMismatch", err)
			}
		})
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

func TestMemoryLimit(t *testing.T) {
	e := newTestEngine(t, Config{})
	in := newTestInstance(t, e, InstanceConfig{MemoryLimit: 16 << 20})
	// The engine limit: an out-of-memory error the program cannot catch.
	_, err := evalString(t, in, `const a = []; try { for (;;) a.push("x".repeat(1 << 16) + a.length) } catch (e) { "caught" }`)
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("got %v, want ErrOutOfMemory", err)
	}
	// The reservation (the hard page cap) sits a little above the limit.
	if got, max := uint64(len(in.mem.buf)), uint64(16<<20)*2; got > max {
		t.Errorf("reserved %d bytes for a 16 MiB limit", got)
	}
}

func TestStackLimit(t *testing.T) {
	e := newTestEngine(t, Config{})
	in := newTestInstance(t, e, InstanceConfig{StackSize: 800 << 10})
	for _, code := range []string{
		`let d = 0; function f() { d++; f() } try { f() } catch (e) { e.name + " " + (d > 1000) }`,
		`function g(a) { return [a].map(g) } try { g(1) } catch (e) { e.name + " true" }`,
		`const o = {}; o.toString = function () { return String(this) }; try { String(o) } catch (e) { e.name + " true" }`,
	} {
		got, err := evalString(t, in, code)
		if err != nil || got != "RangeError true" {
			t.Errorf("%s: got %q, %v; want a catchable RangeError", code, got, err)
		}
	}
}

func TestPerInstanceClockAndRandom(t *testing.T) {
	e := newTestEngine(t, Config{})
	seen := map[string]bool{}
	for i := 0; i < 5; i++ {
		in := newTestInstance(t, e, InstanceConfig{})
		got, err := evalString(t, in, `String(Math.random()) + " " + new Date(86400000).getHours() + " " + new Date(0).toString()`)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(got, " 0 Thu Jan 01 1970 00:00:00 GMT+0000") {
			t.Errorf("not UTC: %q", got)
		}
		seen[got] = true
	}
	if len(seen) != 5 {
		t.Errorf("Math.random repeated across instances: %v", seen)
	}
}

func TestCompilationCacheDir(t *testing.T) {
	dir := t.TempDir()
	newTestEngine(t, Config{CacheDir: dir, CacheKey: testCacheKey})
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("cache dir is empty after compiling: %v", err)
	}
	// A second engine loads from the cache and works.
	e := newTestEngine(t, Config{CacheDir: dir, CacheKey: testCacheKey})
	in := newTestInstance(t, e, InstanceConfig{})
	if got, _ := evalString(t, in, `"ok"`); got != "ok" {
		t.Errorf("engine from cache: %q", got)
	}
}

// A trap (here: recursion past the build's C stack, allowed by a stack
// limit set too high on purpose) kills the instance; later calls report
// ErrDead instead of panicking.
func TestTrapLeavesDeadInstance(t *testing.T) {
	e := newTestEngine(t, Config{})
	in := newTestInstance(t, e, InstanceConfig{StackSize: 4 << 20})
	_, err := in.Eval(`function f() { return [0].map(f) } f()`, "trap.js", 0)
	var trap *TrapError
	if !errors.As(err, &trap) || !errors.Is(err, ErrDead) {
		t.Fatalf("got %v, want a TrapError", err)
	}
	if !in.Dead() {
		t.Error("instance not marked dead")
	}
	if _, err := in.Eval(`1`, "after.js", 0); !errors.Is(err, ErrDead) {
		t.Errorf("after trap: %v", err)
	}
	if _, err := in.String(Value(16)); err == nil {
		t.Error("String on a dead instance succeeded")
	}
}

// TestReentrantExports calls back into the guest, from a host function,
// through the same export the outer call is running in (Call inside
// Call, Eval inside Eval, bytecode inside bytecode), nested several deep.
// wazero's functions are not re-entrant; before each depth had its own,
// this crashed the process.
func TestReentrantExports(t *testing.T) {
	e := newTestEngine(t, Config{})
	in := newTestInstance(t, e, InstanceConfig{})
	code, err := in.Compile("(n) => n * 2", "inner.js", EvalStrict, true)
	if err != nil {
		t.Fatal(err)
	}
	in.SetHost(func(in *Instance, name string, args []Value) (Value, error) {
		n := in.Float64(args[0])
		switch name {
		case "viaCall":
			// Run the guest function passed in: qjs_call inside qjs_call.
			fn := args[1]
			arg, err := in.NewNumber(n)
			if err != nil {
				return 0, err
			}
			defer in.Free(arg)
			return in.Call(fn, in.Global(), arg)
		case "viaEval":
			v, err := in.Eval("21 * 2", "nested.js", EvalStrict)
			return v, err
		default: // viaBytecode
			fn, err := in.EvalBytecode(code)
			if err != nil {
				return 0, err
			}
			defer in.Free(fn)
			arg, err := in.NewNumber(n)
			if err != nil {
				return 0, err
			}
			defer in.Free(arg)
			return in.Call(fn, in.Global(), arg)
		}
	})
	for _, name := range []string{"viaCall", "viaEval", "viaBytecode"} {
		fn, err := in.NewHostFunction(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := in.SetProp(in.Global(), name, fn); err != nil {
			t.Fatal(err)
		}
		in.Free(fn)
	}
	program := `(() => {
		const deep = (n) => n === 0 ? 1 : viaCall(n, (m) => deep(m - 1) + 1);
		return [deep(6), viaEval(0), viaBytecode(5), viaCall(1, () => viaBytecode(3) + viaEval(0))].join(",");
	})()`
	// Through Eval, and through compiled bytecode run inside a host call.
	got, err := evalString(t, in, program)
	if err != nil {
		t.Fatalf("eval: %s (%v)", got, err)
	}
	if want := "7,42,10,48"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	pc, err := in.Compile(program, "program.js", EvalStrict, false)
	if err != nil {
		t.Fatal(err)
	}
	v, err := in.EvalBytecode(pc)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Free(v)
	if s, _ := in.String(v); s != "7,42,10,48" {
		t.Errorf("bytecode: got %q, want %q", s, "7,42,10,48")
	}
}
