package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/nats-io/nats.go"
)

// The cost the cluster adds, side by side with the same program run in
// process: go test ./cluster -bench . -run ^$
//
//	return1:  a program with no call (dispatch, record, result)
//	charge:   one call of a tool that is not read-only (a checkpoint,
//	          a ledger claim and its result around the call)
//	charge5:  five such calls in a row
func BenchmarkCluster(b *testing.B) {
	programs := []struct{ name, code string }{
		{"return1", `return 1`},
		{"charge", `return (await tools.shop.charge({ order: "a" })).charged`},
		{"charge5", `for (let i = 0; i < 5; i++) await tools.shop.charge({ order: "a" + i }); return 5`},
		{"price5", `let s = 0; for (let i = 0; i < 5; i++) s += await tools.shop.price({ sku: "a" }); return s`},
	}
	n := openNode(b, Config{})
	var fx effects
	runWorker(b, n, codemode.Options{Tools: shopTools(&fx, nil), Timeout: 30 * time.Second}, WorkerOptions{})
	local, err := codemode.New(codemode.Options{Tools: shopTools(&fx, nil), StateKey: testKey, Timeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer local.Close()
	front, err := codemode.New(codemode.Options{Tools: shopTools(nil, nil), StateKey: testKey})
	if err != nil {
		b.Fatal(err)
	}
	defer front.Close()
	for _, p := range programs {
		b.Run(p.name+"/in-process", func(b *testing.B) {
			for b.Loop() {
				if res, err := local.Execute(context.Background(), p.code); err != nil || !res.OK {
					b.Fatal(res.Error, err)
				}
			}
		})
		b.Run(p.name+"/cluster", func(b *testing.B) {
			for b.Loop() {
				if res, err := n.Execute(context.Background(), front, p.code, nil); err != nil || !res.OK {
					b.Fatal(res.Error, err)
				}
			}
		})
	}
}

// Parked runs cost disk and memory while they wait for answers: this
// parks b.N runs and reports the bytes of stream data and of heap per
// run (go test ./cluster -bench Parked -benchtime 2000x -run ^$).
func BenchmarkParkedRuns(b *testing.B) {
	dir := b.TempDir()
	n := openNode(b, Config{DataDir: dir})
	var fx effects
	runWorker(b, n, codemode.Options{Tools: shopTools(&fx, nil), Timeout: 30 * time.Second, Policy: askCharge}, WorkerOptions{MaxRuns: 8})
	front, err := codemode.New(codemode.Options{Tools: shopTools(nil, nil)})
	if err != nil {
		b.Fatal(err)
	}
	defer front.Close()
	before := dataBytes(b, dir)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for b.Loop() {
		_, asked, err := n.Start(context.Background(), front, chargeProgram)
		if err != nil || asked == nil {
			b.Fatal(asked, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(dataBytes(b, dir)-before)/float64(b.N), "disk-B/run")
	b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(b.N), "heap-B/run")
}

func dataBytes(b *testing.B, dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total
}

// Throughput with 1, 2 and 4 workers (each with 4 run slots, in this
// process), 32 runs in flight: "io" makes one call that may change
// something and takes 10 ms, as a call to a real service does; "return1"
// makes none (go test ./cluster -bench Throughput -run ^$).
func BenchmarkThroughput(b *testing.B) {
	slow := func(fx *effects) codemode.Tools {
		return codemode.Tools{"svc": codemode.Tools{"post": codemode.Tool{
			Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
				time.Sleep(10 * time.Millisecond)
				return fx.add(ctx), nil
			}}}}
	}
	for _, p := range []struct{ name, code string }{
		{"io", `return await tools.svc.post({})`},
		{"return1", `return 1`},
	} {
		for _, workers := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/workers=%d", p.name, workers), func(b *testing.B) {
				n := openNode(b, Config{})
				var fx effects
				for range workers {
					runWorker(b, n, codemode.Options{Tools: slow(&fx), Timeout: 30 * time.Second}, WorkerOptions{MaxRuns: 4})
				}
				front, err := codemode.New(codemode.Options{Tools: slow(nil), StateKey: testKey, CacheDir: engineCache})
				if err != nil {
					b.Fatal(err)
				}
				defer front.Close()
				b.SetParallelism(16) // 32 submitters on 2 cores
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if res, err := n.Execute(context.Background(), front, p.code, nil); err != nil || !res.OK {
							b.Error(res.Error, err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
			})
		}
	}
}

// The pause a run sees when its worker dies: the only worker is cut off
// (its connection closed, as when its process is killed) while it makes a
// call, a second starts at once, and takes the run over once AckWait has
// passed without word from the first. Reported against AckWait
// (go test ./cluster -bench Failover -run ^$ -benchtime 5x).
func BenchmarkFailover(b *testing.B) {
	const ackWait = 2 * time.Second
	n := openNode(b, Config{AckWait: ackWait})
	front, err := codemode.New(codemode.Options{Tools: shopTools(nil, nil), StateKey: testKey, CacheDir: engineCache})
	if err != nil {
		b.Fatal(err)
	}
	defer front.Close()
	start := func(node *Node, tools codemode.Tools) (stop func()) {
		w, err := NewWorker(node, codemode.Options{Tools: tools, StateKey: testKey, CacheDir: engineCache, Timeout: 30 * time.Second}, WorkerOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = w.Run(ctx) }()
		return func() { cancel(); <-done; w.Close() }
	}
	var total time.Duration
	for b.Loop() {
		dying, err := Open(context.Background(), Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}, AckWait: ackWait})
		if err != nil {
			b.Fatal(err)
		}
		var fx effects
		block := make(chan struct{})
		stopDying := start(dying, shopTools(&fx, block))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		id, err := n.Submit(ctx, front, `try { await tools.shop.charge({ order: "x" }) } catch (e) {} return await tools.shop.price({ sku: "a" })`)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if rec, _, _ := n.record(ctx, id); rec.Status == running && rec.Step > 0 {
				break // charge is checkpointed and held by the dying worker
			}
			time.Sleep(5 * time.Millisecond)
		}
		killed := time.Now()
		dying.nc.Close()
		var rfx effects
		stopRescuer := start(n, shopTools(&rfx, nil))
		res, _, err := n.Wait(ctx, id)
		if err != nil || !res.OK {
			b.Fatal(res.Error, err)
		}
		total += time.Since(killed)
		stopRescuer()
		close(block)
		stopDying()
		dying.Close()
		cancel()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "pause-ms")
	b.ReportMetric(ackWait.Seconds()*1000, "ackwait-ms")
}
