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
	snap, err := in.Snapshot()
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
	snap, err := in.Snapshot()
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
	snap, err := in.Snapshot()
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
	snap, err := in.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("suspend", func(b *testing.B) {
		for b.Loop() {
			if _, err := in.Snapshot(); err != nil {
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
