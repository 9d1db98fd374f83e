package quickjs

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestCompact: a compacted snapshot is smaller, resumes to the same
// state (one block and several), and compacting it again changes nothing.
func TestCompact(t *testing.T) {
	img := frozenImage(t, snapshotSetup)
	for _, c := range []struct{ name, program, check, want string }{
		{"waiting", waitingProgram, `settle("ok"); 0`, "resumed with ok|2000|row 1999|42"},
		{"several blocks", `globalThis.rows = Array.from({ length: 40000 }, (_, i) => ({ id: i, name: "item " + i })); log.push(rows.length, rows[39999].name); 0`, `0`, "40000|item 39999"},
	} {
		t.Run(c.name, func(t *testing.T) {
			snap, compact := snapshotAndCompact(t, img, c.program)
			t.Logf("%d bytes compacted to %d", len(snap), len(compact))
			if len(compact) >= len(snap) {
				t.Errorf("compacted %d bytes to %d", len(snap), len(compact))
			}
			if again, err := Compact(context.Background(), compact); err != nil || string(again) != string(compact) {
				t.Errorf("compacting again: %d bytes, %v", len(again), err)
			}
			back, err := img.Resume(context.Background(), compact, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer back.Close()
			if _, err := evalString(t, back, c.check); err != nil {
				t.Fatal(err)
			}
			if err := back.RunJobs(); err != nil {
				t.Fatal(err)
			}
			if got, _ := evalString(t, back, `log.join("|")`); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestCompactRefusesBadBytes: Compact and Resume refuse damaged compacted
// snapshots, including a block that is not the zstd it should be behind
// a checksum that holds (a writer with another idea of the layout), one
// that announces more than a block, and one with a second frame after it.
func TestCompactRefusesBadBytes(t *testing.T) {
	img := frozenImage(t, snapshotSetup)
	snap, compact := snapshotAndCompact(t, img, waitingProgram)
	for _, bad := range [][]byte{nil, snap[:20], append(append([]byte(nil), snap[:len(snap)-1]...), snap[len(snap)-1]^1)} {
		if _, err := Compact(context.Background(), bad); !errors.Is(err, ErrSnapshotCorrupt) {
			t.Errorf("Compact of %d damaged bytes: %v", len(bad), err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Compact(ctx, snap); !errors.Is(err, context.Canceled) {
		t.Errorf("Compact under a canceled context: %v", err)
	}

	// rebuild makes a compacted snapshot of the given blocks, with a
	// checksum that holds.
	head := compact[:len(compactMagic)+32]
	rebuild := func(blocks ...[]byte) []byte {
		out := append([]byte(nil), head...)
		for _, b := range blocks {
			out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
			out = append(out, b...)
		}
		return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crcTable))
	}
	first := func() []byte { // the first block as Compact wrote it
		n := binary.LittleEndian.Uint32(compact[len(head):])
		return compact[len(head)+4 : len(head)+4+int(n)]
	}()
	enc, _ := zstd.NewWriter(nil)
	frame := func(size int, raw []byte) []byte { return enc.EncodeAll(raw, binary.AppendUvarint(nil, uint64(size))) }
	huge := frame(maxBlock+1, make([]byte, maxBlock+1))
	pages := frame(3, []byte{1, 2, 3})     // not a record of pages
	short := frame(100, make([]byte, 200)) // more than it says
	two := append(append([]byte(nil), first...), first...)
	for name, s := range map[string][]byte{
		"not zstd":         rebuild(first, []byte("\x05not a zstd frame at all")),
		"longer than said": rebuild(first, short),
		"over a block":     rebuild(first, huge),
		"not pages":        rebuild(first, pages),
		"two frames":       rebuild(two),
		"no blocks":        rebuild(),
		"flipped in body":  func() []byte { b := append([]byte(nil), compact...); b[len(b)/2] ^= 0x10; return b }(),
	} {
		if back, err := img.Resume(context.Background(), s, nil); !errors.Is(err, ErrSnapshotCorrupt) {
			if back != nil {
				back.Close()
			}
			t.Errorf("%s: got %v, want ErrSnapshotCorrupt", name, err)
		}
	}
	// The good bytes still resume.
	back, err := img.Resume(context.Background(), rebuild(first), nil)
	if err == nil {
		back.Close()
	}
	if back, err = img.Resume(context.Background(), compact, nil); err != nil {
		t.Fatal(err)
	}
	back.Close()
}

// snapshotAndCompact runs program on an instance of img and returns its
// snapshot, and that compacted.
func snapshotAndCompact(t *testing.T, img *Image, program string) (snap, compact []byte) {
	t.Helper()
	in := fromImage(t, img)
	defer in.Close()
	if _, err := evalString(t, in, program); err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot(in)
	if err != nil {
		t.Fatal(err)
	}
	if compact, err = Compact(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	return snap, compact
}
