package quickjs

import (
	"bytes"
	"context"
	"sync"
	"testing"
)

// memoryNow is a copy of an instance's memory and globals, read without
// running anything in it.
func memoryNow(t *testing.T, in *Instance) ([]byte, []uint64) {
	t.Helper()
	m := in.mod.Memory()
	buf, _ := m.Read(0, m.Size())
	g, err := in.readGlobals()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf), g
}

// warmSnapshot makes an instance hold reuseSetup's rows, snapshots it and
// gives it back to the image, which keeps it warm.
func warmSnapshot(t *testing.T, img *Image) []byte {
	t.Helper()
	// fromImage closes it when the test ends, if it fails first: an
	// instance left open would keep the engine's Close waiting.
	in := fromImage(t, img)
	if _, err := evalString(t, in, reuseSetup+`; Math.random(); 0`); err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot(in)
	if err != nil {
		t.Fatal(err)
	}
	before := img.Warm()
	in.Close()
	if img.Warm() != min(before+1, maxWarm) {
		t.Fatalf("%d warm instances after a snapshot's instance was closed, want %d", img.Warm(), min(before+1, maxWarm))
	}
	return snap
}

// TestWarmResume: resuming the state an instance just wrote takes that
// instance, which holds the same memory, globals, random source and
// clock as an instance decoded from the bytes; resuming the same state
// again decodes it; and both go on alike.
func TestWarmResume(t *testing.T) {
	img := frozenImage(t, "")
	snap := warmSnapshot(t, img)
	warm := resumed(t, img, snap)
	if img.Warm() != 0 {
		t.Fatal("the resume did not take the warm instance")
	}
	cold := resumed(t, img, snap)
	wm, wg := memoryNow(t, warm)
	cm, cg := memoryNow(t, cold)
	if !bytes.Equal(wm, cm) {
		t.Fatalf("the warm instance's memory (%d bytes) is not the decoded one's (%d)", len(wm), len(cm))
	}
	for i := range wg {
		if wg[i] != cg[i] {
			t.Fatalf("global %s: warm %d, decoded %d", img.e.globals[i], wg[i], cg[i])
		}
	}
	const step = `n++; rows[3].s = "changed"; [Math.random(), rows.length, n, performance.now() < 5000].join()`
	a, _ := evalString(t, warm, step)
	b, _ := evalString(t, cold, step)
	if a != b {
		t.Fatalf("after the same step: warm %q, decoded %q", a, b)
	}
	if warm.prior == nil || len(warm.prior.blocks) == 0 {
		t.Fatal("the warm instance has no blocks to copy into its next snapshot")
	}
	next, err := snapshot(warm)
	if err != nil {
		t.Fatal(err)
	}
	if same, all := copiedBlocks(t, snap, next); same*2 < all {
		t.Errorf("%d of %d blocks copied from a warm resume, want most", same, all)
	}
	other, err := snapshot(cold)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := memoryOf(t, img, next), memoryOf(t, img, other); !bytes.Equal(a, b) {
		t.Fatal("the warm instance's next snapshot restores another memory than the decoded one's")
	}
}

// TestWarmForgetsAfterCall: an instance that runs anything after its
// snapshot (a value freed, code evaluated) is not kept warm, and the
// state resumes as it was written.
func TestWarmForgetsAfterCall(t *testing.T) {
	img := frozenImage(t, "")
	for name, after := range map[string]func(in *Instance){
		"eval": func(in *Instance) { _, _ = evalString(t, in, `globalThis.n = 99; 0`) },
		"free": func(in *Instance) {
			v, err := in.NewString("x")
			if err != nil {
				t.Fatal(err)
			}
			in.Free(v)
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := fromImage(t, img)
			if _, err := evalString(t, in, reuseSetup); err != nil {
				t.Fatal(err)
			}
			snap, err := snapshot(in)
			if err != nil {
				t.Fatal(err)
			}
			after(in)
			in.Close()
			if img.Warm() != 0 {
				t.Fatal("an instance that ran after its snapshot was kept warm")
			}
			back := resumed(t, img, snap)
			if got, _ := evalString(t, back, `n + " " + rows.length`); got != "0 8000" {
				t.Fatalf("resumed: %q", got)
			}
		})
	}
}

// TestWarmBounded: the image keeps at most maxWarm warm instances, the
// newest; an older state decodes as before; closing the image releases
// them; two resumes of one state at once each get an instance.
func TestWarmBounded(t *testing.T) {
	img := frozenImage(t, "")
	var snaps [][]byte
	for range maxWarm + 1 {
		snaps = append(snaps, warmSnapshot(t, img))
	}
	if img.Warm() != maxWarm {
		t.Fatalf("%d warm instances, want %d", img.Warm(), maxWarm)
	}
	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		wg.Go(func() {
			s := snaps[len(snaps)-1]
			if i == 0 {
				s = snaps[0]
			}
			back, err := img.Resume(context.Background(), s, nil)
			if err != nil {
				got[i] = err.Error()
				return
			}
			defer back.Close()
			got[i], _ = evalString(t, back, `rows.length + " " + rows[7999].s`)
		})
	}
	wg.Wait()
	for i, g := range got {
		if g != "8000 item 7999" {
			t.Errorf("resume %d: %q", i, g)
		}
	}
	img.Close()
	if img.Warm() != 0 {
		t.Fatalf("%d warm instances after the image closed", img.Warm())
	}
}
