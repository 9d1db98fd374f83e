package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/sandbox"
)

// Options configure a benchmark run.
type Options struct {
	// Quick runs fewer repetitions (for tests).
	Quick bool
	// Executable is the codemode binary for the cold-start and memory
	// measurements; empty skips them.
	Executable string
	// CacheDir is the compilation cache the cold start uses.
	CacheDir string
	// Node is the node binary; empty looks it up on PATH, "-" skips node.
	Node string
}

// Row is one line of the report.
type Row struct {
	Metric   string
	Codemode string
	Node     string
	Ratio    string
	Target   string
}

// Report is the result of Run.
type Report struct {
	Header string
	Rows   []Row
}

// Write prints the report as an aligned table.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintln(w, r.Header)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tcodemode\tnode\tratio\ttarget")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.Metric, dash(row.Codemode), dash(row.Node), dash(row.Ratio), dash(row.Target))
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Run measures everything and returns the report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	rep := &Report{}
	node := findNode(opts.Node)
	rep.Header = fmt.Sprintf("codemode bench — %s, %s/%s, %d CPUs, %s", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), nodeVersion(node))
	reps := 300
	if opts.Quick {
		reps = 20
	}

	// The process-level numbers come first, while this process is small:
	// a child's peak RSS includes the parent's at the moment it was
	// forked, before it executed the binary.
	if opts.Executable != "" {
		// Warm the compilation cache first, so neither number includes
		// compiling the engine.
		if _, _, err := runExe(ctx, opts.Executable, opts.CacheDir, "return 1"); err != nil {
			return nil, err
		}
		rss, err := pipelineRSS(ctx, opts.Executable, opts.CacheDir)
		if err != nil {
			return nil, err
		}
		rep.add(Row{Metric: "peak RSS of a process running the 10k-object pipeline (cache warm)", Codemode: fmt.Sprintf("%.0f MiB", float64(rss)/(1<<20)), Target: "≤ 64 MiB"})
		cold, err := coldStart(ctx, opts.Executable, opts.CacheDir)
		if err != nil {
			return nil, err
		}
		rep.add(Row{Metric: "`codemode run` of return 1, cold process, cache warm (p50)", Codemode: dur(cold), Target: "≤ 100 ms"})
	}
	// Run overhead.
	rt, err := codemode.New(codemode.Options{})
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	if _, err := rt.Execute(ctx, "return 1"); err != nil {
		return nil, err
	}
	warm := make([]time.Duration, 0, reps)
	for i := 0; i < reps; i++ {
		time.Sleep(2 * time.Millisecond) // runs spaced apart, as a model issues them
		start := time.Now()
		if _, err := rt.Execute(ctx, "return 1"); err != nil {
			return nil, err
		}
		warm = append(warm, time.Since(start))
	}
	rep.add(Row{Metric: "run overhead: return 1, warm (p50)", Codemode: dur(median(warm)), Target: "≤ 100 µs"})
	start := time.Now()
	for i := 0; i < reps; i++ {
		if _, err := rt.Execute(ctx, "return 1"); err != nil {
			return nil, err
		}
	}
	rep.add(Row{Metric: "run overhead: return 1, back to back (mean)", Codemode: dur(time.Since(start) / time.Duration(reps))})

	if err := imageRows(ctx, rep, reps); err != nil {
		return nil, err
	}
	if err := suspendRows(ctx, rep, reps); err != nil {
		return nil, err
	}

	// The bridge.
	calls := 2000
	if opts.Quick {
		calls = 200
	}
	noop := codemode.Tool{Run: func(context.Context, json.RawMessage) (any, error) { return json.RawMessage(`{"ok":true}`), nil }}
	sleep := codemode.Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		t := time.NewTimer(time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return 1, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	trt, err := codemode.New(codemode.Options{Tools: codemode.Tools{"ns": codemode.Tools{"noop": noop, "sleep": sleep}}})
	if err != nil {
		return nil, err
	}
	defer trt.Close()
	// One run to warm up, then the median of five.
	var perCall []time.Duration
	for i := 0; i < 6; i++ {
		start := time.Now()
		res, err := trt.Execute(ctx, fmt.Sprintf(`for (let i = 0; i < %d; i++) await tools.ns.noop({ i }); return 1`, calls))
		if err != nil || !res.OK {
			return nil, fmt.Errorf("bridge benchmark failed: %v %+v", err, res.Error)
		}
		if i > 0 {
			perCall = append(perCall, time.Since(start)/time.Duration(calls))
		}
	}
	rep.add(Row{Metric: "tool call, sequential, instant tool (per call, median of 5 runs)", Codemode: dur(median(perCall)), Target: "≤ 10 µs"})
	var effs []float64
	for i := 0; i < 5; i++ {
		start := time.Now()
		res, err := trt.Execute(ctx, `return (await Promise.all(Array.from({ length: 200 }, () => tools.ns.sleep({})))).length`)
		if err != nil || !res.OK {
			return nil, fmt.Errorf("parallel benchmark failed: %v %+v", err, res.Error)
		}
		effs = append(effs, float64(time.Since(start))/float64(200/codemode.DefaultMaxConcurrency*time.Millisecond))
	}
	sort.Float64s(effs)
	rep.add(Row{Metric: "200 parallel calls of a 1 ms tool at cap 8", Codemode: fmt.Sprintf("%.2f× ideal", effs[len(effs)/2]), Target: "≤ 1.2× ideal"})

	// Compute against node.
	var ratios []float64
	for _, w := range workloads {
		ours, err := timeCodemode(ctx, rt, w)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.name, err)
		}
		row := Row{Metric: "compute: " + w.title, Codemode: msStr(ours)}
		if node != "" {
			theirs, err := timeNode(ctx, node, w)
			if err != nil {
				return nil, fmt.Errorf("%s on node: %w", w.name, err)
			}
			row.Node = msStr(theirs)
			if theirs > 0 {
				r := ours / theirs
				ratios = append(ratios, r)
				row.Ratio = fmt.Sprintf("%.1f×", r)
			}
		}
		rep.add(row)
	}
	if len(ratios) > 0 {
		rep.add(Row{Metric: "compute: geometric mean of the ratios", Ratio: fmt.Sprintf("%.1f×", geomean(ratios)), Target: "≤ 30×"})
	}

	return rep, nil
}

func (r *Report) add(row Row) { r.Rows = append(r.Rows, row) }

// imageRows measures instances made from images against the design
// before them, which booted an instance for every run, side by side in
// this process: `return 1` back to back, straight on the sandbox.
func imageRows(ctx context.Context, rep *Report, reps int) error {
	var perRun [2]time.Duration
	for i, boot := range []bool{false, true} {
		sb, err := sandbox.New(ctx, sandbox.Options{BootEveryRun: boot})
		if err != nil {
			return err
		}
		req := sandbox.Request{Program: "(async () => 1)()"}
		n := reps
		if boot {
			n = max(reps/10, 10) // milliseconds each
		}
		for j := 0; j < n+5; j++ {
			if j == 2 {
				// The second run has the image made in the background.
				time.Sleep(100 * time.Millisecond)
			}
			if j == 5 {
				perRun[i] = -time.Duration(time.Now().UnixNano())
			}
			if res, err := sb.Run(ctx, req); err != nil || res.Failure != nil {
				_ = sb.Close()
				return fmt.Errorf("image benchmark: %v %+v", err, res.Failure)
			}
		}
		perRun[i] = (perRun[i] + time.Duration(time.Now().UnixNano())) / time.Duration(n)
		_ = sb.Close()
	}
	rep.add(Row{Metric: "sandbox: return 1 back to back, instances from an image (mean)", Codemode: dur(perRun[0]), Target: "≤ 100 µs"})
	rep.add(Row{Metric: "sandbox: return 1 back to back, booting each instance (the design before images)", Codemode: dur(perRun[1]),
		Ratio: fmt.Sprintf("%.0f× slower", float64(perRun[1])/float64(perRun[0]))})
	return nil
}

// suspendRows measures suspended runs: a state's size, and the round trip
// of resuming one (deliver a result, run to the next call, suspend again),
// for a small program and for one that keeps 1 MiB of data.
func suspendRows(ctx context.Context, rep *Report, reps int) error {
	get := codemode.Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	rt, err := codemode.New(codemode.Options{Tools: codemode.Tools{"x": codemode.Tools{"get": get}}, StateKey: []byte("codemode bench: a 32-byte key...")})
	if err != nil {
		return err
	}
	defer rt.Close()
	for _, c := range []struct {
		what string
		keep int // objects kept; 8,000 are 1 MiB of engine heap
		reps int
	}{{"small program", 0, reps}, {"1 MiB of program data", 8000, max(reps/10, 10)}} {
		code := fmt.Sprintf(`const keep = Array.from({ length: %d }, (_, i) => ({ i, s: "item " + i }))
for (let i = 0; ; i++) { const r = await tools.x.get({ i }); if (r.i < 0) return keep.length }`, c.keep)
		_, s, err := rt.ExecuteSuspendable(ctx, code)
		if err != nil || s == nil {
			return fmt.Errorf("suspend benchmark: the run did not suspend: %v", err)
		}
		p := s.Pending[0]
		result := codemode.CallResult{Index: p.Index, Output: p.Input}
		trips := make([]time.Duration, 0, c.reps)
		for i := 0; i < c.reps+1; i++ {
			start := time.Now()
			_, next, err := rt.Resume(ctx, s.State, result)
			if err != nil || next == nil {
				return fmt.Errorf("suspend benchmark: the run did not suspend again: %v", err)
			}
			if i > 0 { // the first makes the image's instance of this size
				trips = append(trips, time.Since(start))
			}
		}
		rep.add(Row{Metric: "suspended run, " + c.what + ": state size", Codemode: fmt.Sprintf("%.1f KB", float64(len(s.State))/1000)})
		target := ""
		if c.keep > 0 {
			target = "≤ 1 ms"
		}
		rep.add(Row{Metric: "suspended run, " + c.what + ": resume + suspend round trip (p50)", Codemode: dur(median(trips)), Target: target})
	}
	return nil
}

func timeCodemode(ctx context.Context, rt *codemode.Runtime, w workload) (float64, error) {
	res, err := rt.Execute(ctx, harness(w))
	if err != nil {
		return 0, err
	}
	if !res.OK {
		return 0, fmt.Errorf("%s: %s", res.Error.Kind, res.Error.Message)
	}
	var out []float64
	if err := json.Unmarshal(res.Value, &out); err != nil || len(out) != 2 {
		return 0, fmt.Errorf("unexpected result %s", res.Value)
	}
	return out[0], nil
}

func timeNode(ctx context.Context, node string, w workload) (float64, error) {
	script := "const r = (function () {\n" + harness(w) + "\n})(); process.stdout.write(JSON.stringify(r))"
	cmd := exec.CommandContext(ctx, node, "-e", script)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		return 0, err
	}
	var r []float64
	if err := json.Unmarshal(out, &r); err != nil || len(r) != 2 {
		return 0, fmt.Errorf("unexpected node output %q", out)
	}
	return r[0], nil
}

// pipelineRSS runs the 10k-object pipeline in a fresh codemode process
// and returns its peak resident set.
func pipelineRSS(ctx context.Context, exe, cacheDir string) (int64, error) {
	prog := `const rows = Array.from({ length: 10000 }, (_, i) => ({ id: i, region: ["eu", "us", "apac"][i % 3], amount: (i * 7919) % 1000, label: "row " + i }))
return rows.filter((r) => r.amount > 100).map((r) => ({ ...r, taxed: r.amount * 1.2 })).sort((a, b) => b.taxed - a.taxed).slice(0, 5).map((r) => r.id)`
	_, state, err := runExe(ctx, exe, cacheDir, prog)
	if err != nil {
		return 0, err
	}
	rss, ok := peakRSS(state)
	if !ok {
		return 0, errors.New("the system reports no peak resident set for the child process")
	}
	return rss, nil
}

func coldStart(ctx context.Context, exe, cacheDir string) (time.Duration, error) {
	if _, _, err := runExe(ctx, exe, cacheDir, "return 1"); err != nil { // warm the cache
		return 0, err
	}
	var ds []time.Duration
	for i := 0; i < 7; i++ {
		start := time.Now()
		if _, _, err := runExe(ctx, exe, cacheDir, "return 1"); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	return median(ds), nil
}

func runExe(ctx context.Context, exe, cacheDir, prog string) ([]byte, *os.ProcessState, error) {
	args := []string{"run", "--no-cache", "-"}
	if cacheDir != "" {
		args = []string{"run", "--cache-dir", cacheDir, "-"}
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdin = strings.NewReader(prog)
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("%s %v: %w (%s)", exe, args, err, out)
	}
	return out, cmd.ProcessState, nil
}

func findNode(flag string) string {
	if flag == "-" {
		return ""
	}
	if flag != "" {
		return flag
	}
	p, err := exec.LookPath("node")
	if err != nil {
		return ""
	}
	return p
}

func nodeVersion(node string) string {
	if node == "" {
		return "node not found (no comparison)"
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "node " + node
	}
	return "node " + strings.TrimSpace(string(out))
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func geomean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(xs)))
}

func dur(d time.Duration) string {
	switch {
	case d < 100*time.Microsecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return d.Round(time.Millisecond).String()
}

func msStr(ms float64) string {
	if ms < 1 {
		return fmt.Sprintf("%.0f µs", ms*1000)
	}
	return fmt.Sprintf("%.1f ms", ms)
}
