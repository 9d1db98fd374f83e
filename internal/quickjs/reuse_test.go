package quickjs

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/s2"
)

// blocksOf cuts a snapshot into its blocks (the first is the globals').
func blocksOf(t *testing.T, snap []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for rest := snap[len(snapshotMagic)+32 : len(snap)-crcSize]; len(rest) > 0; {
		blk, ok := nextBlock(&rest)
		if !ok {
			t.Fatal("a snapshot that does not cut into blocks")
		}
		out = append(out, blk)
	}
	return out
}

// copiedBlocks counts the page blocks of a that b has too, byte for byte.
func copiedBlocks(t *testing.T, a, b []byte) (same, all int) {
	t.Helper()
	next := map[string]bool{}
	for _, blk := range blocksOf(t, b)[1:] {
		next[string(blk)] = true
	}
	for _, blk := range blocksOf(t, a)[1:] {
		all++
		if next[string(blk)] {
			same++
		}
	}
	return same, all
}

// memoryOf resumes snap and returns a copy of the instance's memory.
func memoryOf(t *testing.T, img *Image, snap []byte) []byte {
	t.Helper()
	in := resumed(t, img, snap)
	m := in.mod.Memory()
	buf, _ := m.Read(0, m.Size())
	return bytes.Clone(buf)
}

// resumed is Image.Resume of snap, closed when the test ends.
func resumed(t *testing.T, img *Image, snap []byte) *Instance {
	t.Helper()
	in, err := img.Resume(context.Background(), snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in
}

// snapshotAfter snapshots a new instance of img once setup has run in it.
func snapshotAfter(t *testing.T, img *Image, setup string) []byte {
	t.Helper()
	in := fromImage(t, img)
	if _, err := evalString(t, in, setup); err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot(in)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

const reuseSetup = `globalThis.rows = Array.from({ length: 8000 }, (_, i) => ({ i, s: "item " + i })); globalThis.n = 0; 0`

// TestSnapshotReusesBlocks: an instance resumed from a snapshot writes
// its next one copying the blocks of pages its step did not change, and
// that snapshot is the one a fresh write gives: its memory is the same
// byte for byte, whatever the step did to the heap — nothing, a little,
// all of it, growing the memory, freeing most of it.
func TestSnapshotReusesBlocks(t *testing.T) {
	img := frozenImage(t, "")
	first := snapshotAfter(t, img, reuseSetup)
	for _, c := range []struct {
		name, step string
		reuse      bool // most blocks are copied
	}{
		{"nothing", `0`, true},
		{"a little", `n++; rows[10].s = "changed"; 0`, true},
		{"all of it", `for (const r of rows) r.s = "row " + r.i + "!"; 0`, false},
		{"grown", `globalThis.more = Array.from({ length: 200000 }, (_, i) => i * 1.5); 0`, true},
		{"freed", `rows.length = 0; globalThis.more = null; 0`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			back := resumed(t, img, first)
			if back.prior == nil {
				t.Fatal("the resumed instance kept nothing of its snapshot")
			}
			if _, err := evalString(t, back, c.step); err != nil {
				t.Fatal(err)
			}
			reused, err := snapshot(back)
			if err != nil {
				t.Fatal(err)
			}
			if back.prior != nil {
				t.Fatal("the prior outlived the snapshot")
			}
			fresh, err := snapshot(back) // the same memory, written without a prior
			if err != nil {
				t.Fatal(err)
			}
			if a, b := memoryOf(t, img, reused), memoryOf(t, img, fresh); !bytes.Equal(a, b) {
				t.Fatalf("the snapshot that copied blocks restores another memory than a fresh one (%d and %d bytes)", len(a), len(b))
			}
			same, all := copiedBlocks(t, first, reused)
			t.Logf("%d of %d blocks copied; %d bytes, fresh %d", same, all, len(reused), len(fresh))
			if c.reuse && same*2 < all {
				t.Errorf("%d of %d blocks copied, want most", same, all)
			}
			if !c.reuse && same*2 > all {
				t.Errorf("%d of %d blocks copied after a step that changed most pages", same, all)
			}
		})
	}
}

// TestSnapshotReuseOwnsItsBytes: the blocks a resumed instance copies
// into its next snapshot are its own copies, checked when it resumed:
// the caller's bytes, overwritten once Resume returned, do not get in.
func TestSnapshotReuseOwnsItsBytes(t *testing.T) {
	img := frozenImage(t, "")
	first := snapshotAfter(t, img, reuseSetup)
	mine := bytes.Clone(first)
	back := resumed(t, img, mine)
	for i := range mine {
		mine[i] = 0xAA
	}
	if _, err := evalString(t, back, `n = 7; 0`); err != nil {
		t.Fatal(err)
	}
	next, err := snapshot(back)
	if err != nil {
		t.Fatal(err)
	}
	if same, all := copiedBlocks(t, first, next); same*2 < all {
		t.Fatalf("%d of %d blocks copied, want most", same, all)
	}
	again := resumed(t, img, next)
	if got, _ := evalString(t, again, `n + " " + rows[7999].s`); got != "7 item 7999" {
		t.Fatalf("resumed: %q", got)
	}
}

// TestSnapshotOldBlocking: a snapshot whose blocks each span many ranges
// (as AppendSnapshot wrote them before a block had one range) resumes,
// and the instance's next snapshot, which can copy none of them, is whole.
// So does a compacted one, whose blocks are not S2.
func TestSnapshotOldBlocking(t *testing.T) {
	img := frozenImage(t, "")
	snap := snapshotAfter(t, img, `globalThis.rows = Array.from({ length: 3000 }, (_, i) => ({ i })); globalThis.n = 0; 0`)
	// One block of all the pages' records, in a snapshot of its own.
	blocks := blocksOf(t, snap)
	var pages []byte
	for _, blk := range blocks[1:] {
		raw, err := s2.Decode(nil, blk)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, raw...)
	}
	if len(pages) > maxBlock {
		t.Fatalf("%d bytes of pages, more than one old block held", len(pages))
	}
	old := append([]byte(nil), snap[:len(snapshotMagic)+32]...)
	for _, blk := range [][]byte{blocks[0], s2.Encode(nil, pages)} {
		old = binary.LittleEndian.AppendUint32(old, uint32(len(blk)))
		old = append(old, blk...)
	}
	old = binary.LittleEndian.AppendUint32(old, crc32.Checksum(old, crcTable))
	compact, err := Compact(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	want := memoryOf(t, img, snap)
	for name, s := range map[string][]byte{"one block": old, "compacted": compact} {
		t.Run(name, func(t *testing.T) {
			if got := memoryOf(t, img, s); !bytes.Equal(got, want) {
				t.Fatal("resumed to another memory")
			}
			back := resumed(t, img, s)
			if back.prior != nil && len(back.prior.blocks) > 0 {
				t.Fatalf("kept %d blocks to copy from a snapshot whose blocks span ranges or are not S2", len(back.prior.blocks))
			}
			if _, err := evalString(t, back, `n = 3; 0`); err != nil {
				t.Fatal(err)
			}
			next, err := snapshot(back)
			if err != nil {
				t.Fatal(err)
			}
			again := resumed(t, img, next)
			if got, _ := evalString(t, again, `n + " " + rows.length`); got != "3 3000" {
				t.Fatalf("resumed: %q", got)
			}
		})
	}
}

// TestSnapshotLargeBlocks: a snapshot with more than maxPrior bytes of
// pages has blocks of largeRange pages, resumes intact, and its instance
// keeps nothing to copy.
func TestSnapshotLargeBlocks(t *testing.T) {
	img := frozenImage(t, "")
	snap := snapshotAfter(t, img, `globalThis.big = Array.from({ length: 400000 }, (_, i) => "s" + i); 0`)
	blocks := blocksOf(t, snap)[1:]
	var pages int
	for _, blk := range blocks {
		n, err := s2.DecodedLen(blk)
		if err != nil {
			t.Fatal(err)
		}
		pages += n
	}
	if pages <= maxPrior {
		t.Fatalf("%d bytes of pages: not past maxPrior", pages)
	}
	if want := pages / (largeRange * pageSize); len(blocks) > 2*want {
		t.Fatalf("%d blocks for %d bytes of pages: not blocks of %d pages", len(blocks), pages, largeRange)
	}
	back := resumed(t, img, snap)
	if back.prior != nil {
		t.Fatal("an instance resumed from more than maxPrior bytes of pages kept them")
	}
	if got, _ := evalString(t, back, `big.length + " " + big[399999]`); got != "400000 s399999" {
		t.Fatalf("resumed: %q", got)
	}
}

// TestSnapshotBadBlockDecodedApart: a block that does not decode, in the
// half of a large snapshot decoded on another goroutine or in the first
// half, is refused as damaged, even under a CRC that holds (a writer with
// another idea of the format), and the image goes on resuming good ones.
func TestSnapshotBadBlockDecodedApart(t *testing.T) {
	img := frozenImage(t, "")
	snap := snapshotAfter(t, img, reuseSetup)
	blocks := blocksOf(t, snap)
	for _, which := range []int{1, len(blocks) - 1} {
		bad := append([]byte(nil), snap[:len(snapshotMagic)+32]...)
		for i, blk := range blocks {
			if i == which {
				// The same decoded size, then bytes that are not S2.
				n, _ := s2.DecodedLen(blk)
				blk = binary.AppendUvarint(nil, uint64(n))
				blk = append(blk, bytes.Repeat([]byte{0xff}, 64)...)
			}
			bad = binary.LittleEndian.AppendUint32(bad, uint32(len(blk)))
			bad = append(bad, blk...)
		}
		bad = binary.LittleEndian.AppendUint32(bad, crc32.Checksum(bad, crcTable))
		if back, err := img.Resume(context.Background(), bad, nil); err != ErrSnapshotCorrupt {
			if back != nil {
				back.Close()
			}
			t.Fatalf("block %d of %d not S2: got %v, want ErrSnapshotCorrupt", which, len(blocks), err)
		}
	}
	back := resumed(t, img, snap)
	if got, _ := evalString(t, back, `rows[7999].s`); got != "item 7999" {
		t.Fatalf("resumed: %q", got)
	}
}
