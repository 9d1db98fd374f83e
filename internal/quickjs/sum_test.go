package quickjs

import (
	"bytes"
	"context"
	"encoding/binary"
	"slices"
	"strconv"
	"testing"
)

// Sum stands for the bytes: any change to a snapshot, including ones that
// frame its blocks differently, gives another sum, and so do bytes that
// are no snapshot at all.
func TestSumCoversEveryByte(t *testing.T) {
	img := frozenImage(t, "")
	snap := snapshotAfter(t, img, `globalThis.rows = Array.from({ length: 20000 }, (_, i) => ({ id: i, name: "item " + i })); 0`)
	want := Sum(snap)
	if Sum(bytes.Clone(snap)) != want {
		t.Fatal("Sum is not a function of the bytes")
	}
	seen := map[[32]byte]string{want: "the snapshot"}
	other := func(name string, b []byte) {
		t.Helper()
		s := Sum(b)
		if prev, ok := seen[s]; ok {
			t.Fatalf("%s has the sum of %s", name, prev)
		}
		seen[s] = name
	}
	for i := 0; i < len(snap); i += 97 {
		b := bytes.Clone(snap)
		b[i] ^= 1
		other("a flip at "+strconv.Itoa(i), b)
	}
	other("the snapshot cut short by a byte", snap[:len(snap)-1])
	other("the snapshot and one more byte", append(bytes.Clone(snap), 0))
	other("no bytes", nil)
	other("one byte", []byte{0})
	// The first block's length made one longer: the framing moves a byte
	// from the second block into the first, and the bytes stay as many.
	head := len(snapshotMagic) + 32
	b := bytes.Clone(snap)
	le := binary.LittleEndian
	n := le.Uint32(b[head:])
	le.PutUint32(b[head:], n+1)
	other("a block framed a byte longer", b)
	// A length that frames nothing: the rest is one segment.
	b = bytes.Clone(snap)
	le.PutUint32(b[head:], 1<<31)
	other("a length past the end", b)
	// Two snapshots' segments swapped over are other bytes too.
	blocks := splitBlocks(t, snap)
	if len(blocks) < 3 {
		t.Fatalf("%d blocks: too few to test", len(blocks))
	}
	swapped := append([]byte{}, snap[:head]...)
	swapped = append(swapped, blocks[1]...)
	swapped = append(swapped, blocks[0]...)
	for _, blk := range blocks[2:] {
		swapped = append(swapped, blk...)
	}
	swapped = append(swapped, snap[len(snap)-crcSize:]...)
	other("two blocks swapped", swapped)
}

// splitBlocks cuts a snapshot's blocks, each with its length.
func splitBlocks(t *testing.T, snap []byte) [][]byte {
	t.Helper()
	var out [][]byte
	rest := snap[len(snapshotMagic)+32 : len(snap)-crcSize]
	for len(rest) > 0 {
		n := int(binary.LittleEndian.Uint32(rest))
		out = append(out, rest[:4+n])
		rest = rest[4+n:]
	}
	return out
}

// TestSumBounded: bytes framed as a great many empty blocks are cut into
// at most maxBlockSegments of them and one segment for the rest, not a
// segment per four bytes: a forged state costs about what hashing it
// costs, before its MAC refuses it. The rest still counts, byte for byte.
func TestSumBounded(t *testing.T) {
	head := len(snapshotMagic) + 32
	b := make([]byte, head+4<<20+crcSize) // a million empty blocks
	_, n, _ := sumSegments(b)
	if n != maxBlockSegments+3 {
		t.Fatalf("%d segments, want %d", n, maxBlockSegments+3)
	}
	seen := map[[32]byte]bool{Sum(b): true}
	for _, at := range []int{head, head + 4*maxBlockSegments - 1, head + 4*maxBlockSegments, len(b) - crcSize - 1, len(b) - 1} {
		c := bytes.Clone(b)
		c[at] = 1
		s := Sum(c)
		if seen[s] {
			t.Fatalf("a byte set at %d: a sum seen before", at)
		}
		seen[s] = true
	}
}

// TestResumeSummed: the block digests SumBlocks gives, handed to
// ResumeSummed, are what the next snapshot's sum is made of for the
// blocks it copies (wrong ones give a sum that is not the bytes', which
// is how a state that would not open is made, never another state), and
// digests of another count are not used.
func TestResumeSummed(t *testing.T) {
	img := frozenImage(t, "")
	snap := snapshotAfter(t, img, reuseSetup)
	sum, blocks := SumBlocks(snap)
	if sum != Sum(snap) || len(blocks) < 3 {
		t.Fatalf("SumBlocks: %d blocks, sum equal %v", len(blocks), sum == Sum(snap))
	}
	if _, none := SumBlocks(snap[:len(snap)-crcSize-1]); none != nil {
		t.Fatal("digests for bytes whose blocks do not frame them")
	}
	step := func(digests [][32]byte) (next []byte, written, actual [32]byte) {
		t.Helper()
		back, err := img.ResumeSummed(context.Background(), snap, digests, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer back.Close()
		if _, err := evalString(t, back, `n++`); err != nil {
			t.Fatal(err)
		}
		next, written, err = back.AppendSnapshot(context.Background(), nil, SnapshotLimits{})
		if err != nil {
			t.Fatal(err)
		}
		return next, written, Sum(next)
	}
	if _, w, a := step(blocks); w != a {
		t.Fatal("with the snapshot's digests, the next sum is not the bytes'")
	}
	bad := slices.Clone(blocks)
	for i := range bad {
		bad[i][0] ^= 1
	}
	if _, w, a := step(bad); w == a {
		t.Fatal("the digests handed in were not used for the copied blocks")
	}
	if _, w, a := step(bad[1:]); w != a {
		t.Fatal("digests of another count were used")
	}
}
