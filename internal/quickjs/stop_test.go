package quickjs

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

var stopModes = []struct {
	name string
	mode StopMode
}{{"fuel", StopFuel}, {"contextdone", StopContextDone}, {"none", StopNone}}

// BenchmarkStopModes measures what each stop mechanism costs guest
// compute: the numbers behind RATIONALE.md ("Why instrument loops?").
func BenchmarkStopModes(b *testing.B) {
	workloads := []struct{ name, code string }{
		{"fib25", `function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2) } fib(25)`},
		{"objects", `const rows = Array.from({ length: 10000 }, (_, i) => ({ id: i, group: i % 7, score: (i * 7919) % 1000 }));
			rows.filter((r) => r.score > 100).map((r) => ({ ...r, score2: r.score * 2 })).sort((a, b) => a.score - b.score).reduce((s, r) => s + r.score2, 0)`},
		{"json", `const v = Array.from({ length: 5000 }, (_, i) => ({ i, s: "item " + i, tags: ["a", "b"], nested: { x: i / 3 } }));
			JSON.parse(JSON.stringify(v)).length`},
		{"strings", `let s = ""; for (let i = 0; i < 10000; i++) s += "line " + i + "\n"; s.replace(/line (\d+)/g, "L$1").length`},
	}
	for _, m := range stopModes {
		e, err := NewEngine(context.Background(), Config{Wasm: testWasm(b), Stop: m.mode})
		if err != nil {
			b.Fatal(err)
		}
		for _, w := range workloads {
			b.Run(m.name+"/"+w.name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					in, err := e.NewInstance(context.Background(), InstanceConfig{})
					if err != nil {
						b.Fatal(err)
					}
					v, err := in.Eval(w.code, "bench.js", 0)
					if err != nil {
						b.Fatal(err)
					}
					in.Free(v)
					in.Close()
				}
			})
		}
		_ = e.Close(context.Background())
	}
}

// TestStopLatency reports how soon each mechanism stops a stall after the
// deadline. It asserts only that fuel stops every stall (loosely bounded:
// timings are not asserted on shared machines); the other modes are
// reported for comparison.
func TestStopLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	stalls := []struct{ name, code string }{
		{"busy loop", `while (true) {}`},
		{"builtin loop", `const big = Array.from({ length: 20000 }, (_, i) => ({ i, s: "x".repeat(20) })); for (;;) JSON.stringify(big)`},
		{"regex bomb", `/^((a+)+)\1?$/.test("a".repeat(40) + "!")`},
		{"deep stringify", `let v = 0; for (let i = 0; i < 60000; i++) v = [v]; JSON.stringify(v)`},
		{"big sort", `const a = Array.from({ length: 300000 }, (_, i) => String((i * 7919) % 300000)); for (;;) a.slice().sort()`},
	}
	const budget = 100 * time.Millisecond
	for _, m := range stopModes {
		if m.mode == StopNone {
			continue // would run each stall to its end
		}
		e := newTestEngine(t, Config{Stop: m.mode})
		for _, s := range stalls {
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			in, err := e.NewInstance(ctx, InstanceConfig{MemoryLimit: 256 << 20})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			in.SetDeadline(start.Add(budget))
			_, err = in.Eval(s.code, "stall.js", 0)
			over := time.Since(start) - budget
			in.Close()
			cancel()
			t.Logf("%-11s %-14s stopped %6.1f ms after the deadline (%v)", m.name, s.name, float64(over.Microseconds())/1000, err)
			if m.mode == StopFuel && (!errors.Is(err, ErrInterrupted) || over > 2*time.Second) {
				t.Errorf("fuel did not stop %s: %v after %v", s.name, err, over)
			}
		}
	}
}

func TestKillFromAnotherGoroutine(t *testing.T) {
	e := newTestEngine(t, Config{})
	in := newTestInstance(t, e, InstanceConfig{})
	time.AfterFunc(50*time.Millisecond, in.Kill)
	_, err := in.Eval(`for (;;) {}`, "kill.js", 0)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("got %v, want ErrInterrupted", err)
	}
	// A dead instance answers every call with an error, never a panic.
	if _, err := in.Eval(`1`, "after.js", 0); !errors.Is(err, ErrInterrupted) {
		t.Errorf("after kill: %v", err)
	}
	if _, err := in.NewString("x"); err == nil {
		t.Error("NewString on a dead instance succeeded")
	}
	in.Free(Value(8))
	if in.PromiseState(Value(8)) != -1 {
		t.Error("PromiseState on a dead instance")
	}
	if got := in.Ticks(); got == 0 {
		t.Error("no fuel ticks recorded")
	}
	if in.AllocatedSize() != 0 {
		t.Error("AllocatedSize on a dead instance")
	}
}

// BenchmarkEngineCases times the pinned engine on the cases of
// testdata/engine-cases.txt, with loop fuel (as runs use it) and with no
// stop mechanism: scripts/engine-flags.sh times the same cases on engines
// built from source at other optimization levels, natively and under V8
// (BENCHMARKS.md, "Where compute time goes").
func BenchmarkEngineCases(b *testing.B) {
	data, err := os.ReadFile("testdata/engine-cases.txt")
	if err != nil {
		b.Fatal(err)
	}
	type engineCase struct{ name, code string }
	var cases []engineCase
	for line := range strings.Lines(string(data)) {
		name, code, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		if ok && !strings.HasPrefix(name, "#") {
			cases = append(cases, engineCase{name, code})
		}
	}
	if len(cases) == 0 {
		b.Fatal("no cases in testdata/engine-cases.txt")
	}
	for _, m := range stopModes {
		if m.mode == StopContextDone {
			continue // BenchmarkStopModes says what it costs
		}
		e, err := NewEngine(context.Background(), Config{Wasm: testWasm(b), Stop: m.mode})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cases {
			b.Run(m.name+"/"+c.name, func(b *testing.B) {
				for b.Loop() {
					in, err := e.NewInstance(context.Background(), InstanceConfig{MemoryLimit: 256 << 20})
					if err != nil {
						b.Fatal(err)
					}
					v, err := in.Eval(c.code, "case.js", 0)
					if err != nil {
						b.Fatal(c.name, err)
					}
					in.Free(v)
					in.Close()
				}
			})
		}
		_ = e.Close(context.Background())
	}
}
