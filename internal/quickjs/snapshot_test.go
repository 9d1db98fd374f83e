package quickjs

import (
	"context"
	"errors"
	"testing"
	"time"
)

// frozenImage boots a frozen instance on its own engine, runs setup and
// captures it: what a second process does to get the same image.
func frozenImage(t testing.TB, setup string) *Image {
	t.Helper()
	return captureImage(t, newTestEngine(t, Config{}), InstanceConfig{Frozen: true}, setup)
}

// snapshot is AppendSnapshot without limits, into a new slice. It also
// checks the sum AppendSnapshot returned is Sum of the bytes: every test
// that writes a snapshot checks that, copied blocks and all.
func snapshot(in *Instance) ([]byte, error) {
	snap, sum, err := in.AppendSnapshot(context.Background(), nil, SnapshotLimits{})
	if err == nil && Sum(snap) != sum {
		return nil, errors.New("the snapshot's sum is not Sum of its bytes")
	}
	return snap, err
}

const snapshotSetup = `globalThis.log = []; globalThis.settle = null; 0`

// waitingProgram leaves a promise waiting on a resolver that the host
// calls later, as a tool call does.
const waitingProgram = `
globalThis.counter = 41;
const big = Array.from({ length: 2000 }, (_, i) => ({ i, s: "row " + i }));
new Promise(r => { settle = r }).then(v => {
	log.push("resumed with " + v, big.length, big[1999].s, ++counter);
});
0`

// TestSnapshotAcrossEngines suspends an instance with a pending promise
// and resumes it on another engine whose image was made the same way, as
// another process would: the promise settles and the state is intact.
func TestSnapshotAcrossEngines(t *testing.T) {
	a, b := frozenImage(t, snapshotSetup), frozenImage(t, snapshotSetup)
	if !a.Portable() || a.sum != b.sum {
		t.Fatal("two frozen boots of the same code gave different images")
	}
	in := fromImage(t, a)
	if _, err := evalString(t, in, waitingProgram); err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Close()
	t.Logf("snapshot: %d bytes", len(snap))
	back, err := b.Resume(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if _, err := evalString(t, back, `settle("ok"); 0`); err != nil {
		t.Fatal(err)
	}
	if err := back.RunJobs(); err != nil {
		t.Fatal(err)
	}
	got, _ := evalString(t, back, `log.join("|")`)
	if got != "resumed with ok|2000|row 1999|42" {
		t.Fatalf("got %q", got)
	}
}

// TestSnapshotRefusesBadBytes: damaged, truncated, foreign and empty
// snapshots are refused with named errors, and nothing is left running.
func TestSnapshotRefusesBadBytes(t *testing.T) {
	img := frozenImage(t, snapshotSetup)
	other := frozenImage(t, `globalThis.different = 1; 0`)
	in := fromImage(t, img)
	if _, err := evalString(t, in, waitingProgram); err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot(in)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := append([]byte(nil), snap...)
		b[i] ^= 0x40
		return b
	}
	cases := []struct {
		name string
		snap []byte
		img  *Image
		want error
	}{
		{"flipped in the body", flip(len(snap) / 2), img, ErrSnapshotCorrupt},
		{"flipped in the header", flip(3), img, ErrSnapshotCorrupt},
		{"flipped in the checksum", flip(len(snap) - 1), img, ErrSnapshotCorrupt},
		{"truncated", snap[:len(snap)-100], img, ErrSnapshotCorrupt},
		{"empty", nil, img, ErrSnapshotCorrupt},
		{"another image", snap, other, ErrSnapshotImage},
	}
	for _, c := range cases {
		got, err := c.img.Resume(context.Background(), c.snap, nil)
		if !errors.Is(err, c.want) {
			if got != nil {
				got.Close()
			}
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	// The good bytes still resume.
	back, err := img.Resume(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	back.Close()
}

// TestSnapshotKeepsClockAndRandom: a resumed instance's monotonic clock
// goes on from where it stood (time spent suspended does not count), and
// its Math.random goes on with the same sequence.
func TestSnapshotKeepsClockAndRandom(t *testing.T) {
	img := frozenImage(t, "")
	in := fromImage(t, img)
	if _, err := evalString(t, in, `globalThis.t0 = performance.now(); 0`); err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot(in)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := evalString(t, in, `[Math.random(), Math.random()].join()`)
	in.Close()
	time.Sleep(300 * time.Millisecond)
	back, err := img.Resume(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	got, _ := evalString(t, back, `[Math.random(), Math.random()].join()`)
	if got != want {
		t.Errorf("Math.random after resuming: %s, want %s", got, want)
	}
	gap, _ := evalString(t, back, `String(performance.now() - t0 < 250)`)
	if gap != "true" {
		t.Errorf("time spent suspended counted on the monotonic clock")
	}
}

// BenchmarkSnapshot measures suspending and resuming an instance holding
// about 1 MiB of heap, apart and as a round trip.
func BenchmarkSnapshot(b *testing.B) {
	img := frozenImage(b, "")
	in := fromImage(b, img)
	if _, err := evalString(b, in, `globalThis.rows = Array.from({ length: 4500 }, (_, i) => ({ id: i, name: "item " + i, tags: ["a", "b"] })); 0`); err != nil {
		b.Fatal(err)
	}
	b.Logf("heap %d KiB, memory %d KiB", in.AllocatedSize()>>10, in.mod.Memory().Size()>>10)
	snap, err := snapshot(in)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("suspend", func(b *testing.B) {
		for b.Loop() {
			if _, err := snapshot(in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(snap)), "bytes")
	})
	b.Run("resume", func(b *testing.B) {
		for b.Loop() {
			back, err := img.Resume(context.Background(), snap, nil)
			if err != nil {
				b.Fatal(err)
			}
			back.Close()
		}
	})
}

// TestSnapshotBlocks: a snapshot of many blocks appends to the caller's
// bytes, leaves the room asked for, and resumes intact; a context that
// ends and a limit that is too small stop it, the limit with an estimate
// of the size it would have had.
func TestSnapshotBlocks(t *testing.T) {
	img := frozenImage(t, "")
	in := fromImage(t, img)
	defer in.Close()
	// About 8 MiB of heap: a few blocks.
	if _, err := evalString(t, in, `globalThis.rows = Array.from({ length: 40000 }, (_, i) => ({ id: i, name: "item " + i, tags: ["a", "b"] })); 0`); err != nil {
		t.Fatal(err)
	}
	prefix := []byte("the caller's bytes")
	const room = 1000
	snap, sum, err := in.AppendSnapshot(context.Background(), prefix, SnapshotLimits{Room: room})
	if err != nil {
		t.Fatal(err)
	}
	if Sum(snap[len(prefix):]) != sum {
		t.Fatal("the sum covers more or less than the snapshot")
	}
	if string(snap[:len(prefix)]) != string(prefix) {
		t.Fatalf("the caller's bytes were not kept: %q", snap[:len(prefix)])
	}
	if cap(snap)-len(snap) < room {
		t.Errorf("room after the snapshot: %d bytes, want at least %d", cap(snap)-len(snap), room)
	}
	size := len(snap) - len(prefix)
	if size < 256<<10 {
		t.Fatalf("snapshot of %d bytes: too small to test several blocks", size)
	}
	back, err := img.Resume(context.Background(), snap[len(prefix):], nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := evalString(t, back, `rows.length + " " + rows[39999].name + " " + rows.reduce((s, r) => s + r.id, 0)`)
	back.Close()
	if want := "40000 item 39999 799980000"; got != want {
		t.Fatalf("resumed: %q, want %q", got, want)
	}

	t.Run("limit", func(t *testing.T) {
		_, _, err := in.AppendSnapshot(context.Background(), nil, SnapshotLimits{Max: size / 4})
		var se *SnapshotSizeError
		if !errors.As(err, &se) {
			t.Fatalf("got %v, want a SnapshotSizeError", err)
		}
		// An extrapolation: within a factor of two of the real size.
		if se.Max != size/4 || se.About < int64(size/2) || se.About > int64(2*size) {
			t.Fatalf("got about %d bytes over %d, the snapshot takes %d", se.About, se.Max, size)
		}
	})
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := in.AppendSnapshot(ctx, nil, SnapshotLimits{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		// A deadline that passes half way: writing stops at the next
		// block.
		mid := &endsAfter{Context: context.Background(), checks: 3}
		if _, _, err := in.AppendSnapshot(mid, nil, SnapshotLimits{}); !errors.Is(err, context.DeadlineExceeded) || mid.checks != -1 {
			t.Fatalf("got %v after %d more checks, want context.DeadlineExceeded at the first check after the end", err, -mid.checks-1)
		}
	})
	// The instance still snapshots as before (but for its clock, whose
	// bytes compress a little differently).
	again, err := snapshot(in)
	if err != nil || len(again) < size-64 || len(again) > size+64 {
		t.Fatalf("snapshot after the stopped ones: %d bytes, %v; want about %d", len(again), err, size)
	}
}

// endsAfter is a context whose deadline passes after a number of checks
// of Err: a deadline passing part way through some work, at a point the
// test chooses.
type endsAfter struct {
	context.Context
	checks int
}

func (c *endsAfter) Err() error {
	c.checks--
	if c.checks < 0 {
		return context.DeadlineExceeded
	}
	return nil
}
