package cluster

import (
	"context"
	"io/fs"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
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
