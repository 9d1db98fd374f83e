package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// suspendBench is a Runtime whose tool answers at once, with a key.
func suspendBench(b *testing.B) *Runtime {
	get := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	return benchRuntime(b, Options{Tools: Tools{"x": Tools{"get": get}}, StateKey: testStateKey})
}

// BenchmarkSuspendResume is the round trip of a suspended run: Resume
// delivers a result to the run in a state, which runs to its next call
// and suspends again (a new state). Every op resumes the same state, so
// that an op decodes it; in the -chain cases each op resumes the state
// the last one returned, as a run's steps do (the instance that wrote it
// is kept warm for it), 16 steps at a time. keep is how much the program holds across the
// step (an array of objects: 8,000 of them take 1 MiB of engine heap,
// measured).
func BenchmarkSuspendResume(b *testing.B) {
	for _, c := range []struct {
		name  string
		keep  int
		chain bool
	}{{"small", 0, false}, {"heap-1MiB", 8_000, false}, {"small-chain", 0, true}, {"heap-1MiB-chain", 8_000, true}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			rt := suspendBench(b)
			code := `const keep = Array.from({ length: ` + strconv.Itoa(c.keep) + ` }, (_, i) => ({ i, s: "item " + i }))
for (let i = 0; ; i++) { const r = await tools.x.get({ i }); if (r.i < 0) return keep.length }`
			_, s, err := rt.ExecuteSuspendable(ctx, code)
			if err != nil || s == nil {
				b.Fatal("not suspended", err)
			}
			p := s.Pending[0]
			result := CallResult{Index: p.Index, Output: p.Input}
			size := 0
			b.ResetTimer()
			state := s.State
			for i := 0; i < b.N; i++ {
				_, next, err := rt.Resume(ctx, state, result)
				if err != nil || next == nil {
					b.Fatal("not suspended again", err)
				}
				size = len(next.State)
				switch {
				case c.chain && (i+1)%chainSteps != 0:
					state, result = next.State, CallResult{Index: next.Pending[0].Index, Output: next.Pending[0].Input}
				case c.chain: // a state's audit grows with its steps: start again
					state, result = s.State, CallResult{Index: p.Index, Output: p.Input}
				}
			}
			b.ReportMetric(float64(len(s.State)), "state-bytes")
			b.ReportMetric(float64(size), "next-state-bytes")
		})
	}
}

// chainSteps is how many steps a -chain case of BenchmarkSuspendResume
// runs before it starts from the first state again.
const chainSteps = 16

// BenchmarkParked holds b.N suspended runs of a small program in memory:
// what parking a run costs is its state's bytes.
func BenchmarkParked(b *testing.B) { benchParked(b, false) }

// BenchmarkParkedCompacted is BenchmarkParked with each state compacted
// (Runtime.CompactState) before it is held.
func BenchmarkParkedCompacted(b *testing.B) { benchParked(b, true) }

func benchParked(b *testing.B, compact bool) {
	ctx := context.Background()
	rt := suspendBench(b)
	const code = `const order = await tools.x.get({ id: "o-1", total: 4599 })
const customer = await tools.x.get({ id: order.id, name: "Ada" })
return { order, customer }`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resetPeakRSS()
	states := make([][]byte, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, s, err := rt.ExecuteSuspendable(ctx, code)
		if err != nil || s == nil {
			b.Fatal("not suspended", err)
		}
		state := s.State
		if compact {
			if state, err = rt.CompactState(ctx, state); err != nil {
				b.Fatal(err)
			}
		}
		states = append(states, state)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	total := 0
	for _, s := range states {
		total += len(s)
	}
	b.ReportMetric(float64(total)/float64(b.N), "state-bytes")
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(b.N), "heap-bytes/run")
	if p := peakRSS(); p > 0 {
		b.ReportMetric(float64(p)/(1<<20), "peak-RSS-MiB")
	}
	runtime.KeepAlive(states)
}

// largeHeapProgram keeps half a million small objects (about 50 MB of
// engine heap) across a call.
const largeHeapProgram = `const big = []
for (let i = 0; i < 500000; i++) big.push({ id: i, name: "item " + i, tags: ["a", "b"] })
await tools.x.get({})
return big.length`

// BenchmarkSuspendLarge suspends a run that holds about 50 MB: the
// time from the call's admission (the program's last instruction before
// it waits) to ExecuteSuspendable's return, and the process's peak RSS
// over the op (VmHWM, reset before it where Linux allows). "execute" is
// the same program under Execute, with a tool that answers at once, for
// the footprint of the run itself; "timeout-5s" suspends it under a 5 s
// Timeout, which building the data nearly uses up, and reports how long
// the whole call took and whether it returned a state. Run it once per
// process for peaks that do not include an earlier op's garbage:
//
//	go test -run '^$' -bench SuspendLarge -benchtime 1x .
func BenchmarkSuspendLarge(b *testing.B) {
	for _, mode := range []string{"suspend", "execute", "timeout-5s"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			var admitted atomic.Int64
			get := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
			opts := Options{
				Tools: Tools{"x": Tools{"get": get}}, StateKey: testStateKey, MaxMemoryBytes: 256 << 20,
				Policy: func(context.Context, Call) Decision {
					admitted.Store(time.Now().UnixNano())
					if mode == "execute" {
						return Decision{Verdict: Allow}
					}
					return Decision{Verdict: Ask}
				},
			}
			if mode == "timeout-5s" {
				opts.Timeout = 5 * time.Second
			}
			rt := benchRuntime(b, opts)
			var after []time.Duration
			var peak int64
			for i := 0; i < b.N; i++ {
				resetPeakRSS()
				start := time.Now()
				switch mode {
				case "execute":
					res, err := rt.Execute(ctx, largeHeapProgram)
					if err != nil || !res.OK {
						b.Fatal("run failed", err, res.Error)
					}
				case "suspend":
					_, s, err := rt.ExecuteSuspendable(ctx, largeHeapProgram)
					if err != nil || s == nil {
						b.Fatal("not suspended", err)
					}
					b.ReportMetric(float64(len(s.State))/1e6, "state-MB")
				case "timeout-5s":
					res, s, err := rt.ExecuteSuspendable(ctx, largeHeapProgram)
					if err != nil || s == nil && !errors.Is(res.Err(), TimeoutExceeded) {
						b.Fatal("neither suspended nor timed out", err, res.Error)
					}
					b.ReportMetric(time.Since(start).Seconds(), "s-total")
					b.ReportMetric(float64(len(res.ToolCalls)), "calls-made")
					if s != nil {
						b.ReportMetric(1, "suspended")
					} else {
						b.ReportMetric(0, "suspended")
					}
				}
				after = append(after, time.Duration(time.Now().UnixNano()-admitted.Load()))
				peak = max(peak, peakRSS())
			}
			slices.Sort(after)
			if admitted.Load() != 0 {
				b.ReportMetric(float64(after[len(after)/2])/1e6, "ms-after-call")
			}
			if peak > 0 {
				b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
			}
		})
	}
}

// resetPeakRSS starts the process's peak RSS over from its current RSS
// (Linux only; elsewhere nothing happens).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is the process's peak RSS in bytes (VmHWM), or zero where
// /proc does not say.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
