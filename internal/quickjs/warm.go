package quickjs

import (
	"bytes"
	"context"
)

// Warm instances.
//
// A run that suspends usually resumes from the state it just wrote, often
// in the same process: an approval, a Steps loop. Resuming decodes the
// state's pages into a reset instance, but the instance that wrote the
// state held exactly that memory when it finished. So an instance whose
// last act was AppendSnapshot is kept as it is, with a copy of the
// snapshot and the pages it recorded, instead of being reset; an
// Image.Resume given the same bytes takes it: no decoding, no XOR, no
// reset, and its next snapshot copies unchanged blocks as any resumed
// instance's does.
//
// Identity is the bytes themselves, compared in full: equal bytes are the
// same memory, whoever holds them, so a state resumed twice finds the
// warm instance once and decodes the second time. Any call into the
// instance after its snapshot (freeing a value, say) changes its memory,
// so it clears what AppendSnapshot kept and the instance is reset as
// before.

// maxWarm bounds the warm instances an Image keeps; a new one displaces
// the oldest, which is reset.
const maxWarm = 2

// maxWarmState is the largest snapshot a warm instance keeps a copy of.
const maxWarmState = 4 << 20

// written is what an instance's last snapshot recorded: its bytes, and
// the pages of each block as a prior.
type written struct {
	snap  []byte
	prior *prior
}

// forget drops what the instance's last snapshot recorded: it is about to
// change.
func (in *Instance) forget() {
	if in.wrote != nil {
		in.wrote.prior.release()
		in.wrote = nil
	}
}

// parkWarm keeps in, unreset, for a resume of its last snapshot,
// reporting false when it cannot be kept (the caller resets it instead).
func (img *Image) parkWarm(in *Instance) bool {
	if in.wrote == nil || in.dead || in.killed.Load() || in.depth != 0 || in.mod == nil {
		return false
	}
	img.mu.Lock()
	if img.closed {
		img.mu.Unlock()
		return false
	}
	var out *Instance
	if len(img.warm) >= maxWarm {
		out = img.warm[0]
		img.warm = append(img.warm[:0], img.warm[1:]...)
	}
	// Only the wasm instance and the snapshot are kept (adopt wraps it
	// anew): the host function would keep the finished run alive.
	in.host = nil
	img.warm = append(img.warm, in)
	img.mu.Unlock()
	if out != nil {
		// (Its handle was released when it was parked: reset, not
		// recycle, which refuses a released instance.)
		out.forget()
		if !img.reset(out) {
			out.closeModule()
		}
	}
	return true
}

// takeWarm returns the warm instance whose last snapshot is snap, taken
// from the image, or nil.
func (img *Image) takeWarm(snap []byte) *Instance {
	// The bytes are compared outside the lock (a copy is never written
	// once kept); the instance is taken under it, if it is still there.
	type candidate struct {
		in   *Instance
		snap []byte
	}
	var cands [maxWarm]candidate
	n := 0
	img.mu.Lock()
	for _, w := range img.warm {
		if len(w.wrote.snap) == len(snap) {
			cands[n] = candidate{w, w.wrote.snap}
			n++
		}
	}
	img.mu.Unlock()
	for _, c := range cands[:n] {
		if !bytes.Equal(c.snap, snap) {
			continue
		}
		img.mu.Lock()
		for i, w := range img.warm {
			if w == c.in {
				img.warm = append(img.warm[:i], img.warm[i+1:]...)
				img.mu.Unlock()
				return w
			}
		}
		img.mu.Unlock()
	}
	return nil
}

// resumeWarm makes an instance around w, a warm instance whose memory is
// the snapshot's, with the snapshot's globals, clock and random source.
func (img *Image) resumeWarm(ctx context.Context, w *Instance, host HostFunc, globals []uint64) (*Instance, error) {
	if err := img.e.addLive(); err != nil {
		w.forget()
		w.closeModule()
		return nil, err
	}
	in := img.adopt(ctx, w.mod, w.mem, w)
	in.counted = true
	in.host = host
	in.prior, w.wrote.prior = w.wrote.prior, nil
	w.wrote = nil
	if err := setGlobals(in.mod, img.e.globals, globals); err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

// Warm reports how many warm instances the image holds.
func (img *Image) Warm() int {
	img.mu.Lock()
	defer img.mu.Unlock()
	return len(img.warm)
}
