package quickjs

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Compacted snapshots.
//
// AppendSnapshot compresses with S2, which is fast enough to sit in every
// round trip of a suspended run. A snapshot that is to be kept a while
// (a run parked for an approval) can be compacted: the same layout, under
// its own magic, with each block in zstd instead (after the size it
// decodes to, which zstd leaves out of small frames). A small run's snapshot
// shrinks by about a quarter for a few hundred microseconds of work, off
// the round trip; Image.Resume reads both.

const compactMagic = "CMQJSNZ1"

var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true),
			zstd.WithEncoderCRC(false)) // the snapshot has its own CRC
		if err != nil {
			panic(err) // only for invalid options
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxBlock), zstd.WithDecoderConcurrency(0),
			zstd.IgnoreChecksum(true))
		if err != nil {
			panic(err)
		}
		return d
	})
)

// Compact returns snap with its blocks in zstd, ready to be kept. A
// snapshot already compacted is returned as it is, unchecked (Resume
// checks it). Any other is checked as Resume checks it (its CRC, and
// what each block decodes to), but not against an image: compacting
// needs none. It stops with ctx's error
// between blocks. The result may have room to spare (as much as snap
// took): whoever keeps it seals it first.
func Compact(ctx context.Context, snap []byte) ([]byte, error) {
	head := len(snapshotMagic) + 32
	if len(snap) >= len(compactMagic) && string(snap[:len(compactMagic)]) == compactMagic {
		return snap, nil
	}
	if len(snap) < head+crcSize || string(snap[:len(snapshotMagic)]) != snapshotMagic {
		return nil, ErrSnapshotCorrupt
	}
	body, sum := snap[:len(snap)-crcSize], snap[len(snap)-crcSize:]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(sum) {
		return nil, ErrSnapshotCorrupt
	}
	dec := blockBuffers.get()
	defer blockBuffers.put(dec)
	if cap(dec.b) < maxBlock {
		dec.b = make([]byte, 0, maxBlock)
	}
	out := make([]byte, 0, len(snap))
	out = append(out, compactMagic...)
	out = append(out, body[len(snapshotMagic):head]...)
	enc := zstdEncoder()
	for rest := body[head:]; len(rest) > 0; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		blk, ok := nextBlock(&rest)
		if !ok {
			return nil, ErrSnapshotCorrupt
		}
		if size, ok := s2Codec.size(blk); !ok || size > maxBlock {
			return nil, ErrSnapshotCorrupt
		}
		raw, ok := s2Codec.decode(dec.b, blk)
		if !ok {
			return nil, ErrSnapshotCorrupt
		}
		at := len(out)
		out = append(out, 0, 0, 0, 0)
		out = binary.AppendUvarint(out, uint64(len(raw))) // zstd leaves it out of small frames
		out = enc.EncodeAll(raw, out)
		binary.LittleEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crcTable)), nil
}

// blockCodec decodes the blocks of one kind of snapshot.
type blockCodec struct {
	// size is what a block decodes to, read from its header.
	size func(blk []byte) (int, bool)
	// decode decodes blk into dst's capacity.
	decode func(dst, blk []byte) ([]byte, bool)
	// reusable: AppendSnapshot may copy a block of this kind into a new
	// snapshot (which is S2).
	reusable bool
}

var s2Codec = blockCodec{
	size: func(blk []byte) (int, bool) {
		n, err := s2.DecodedLen(blk)
		return n, err == nil
	},
	decode: func(dst, blk []byte) ([]byte, bool) {
		raw, err := s2.Decode(dst[:cap(dst)], blk)
		return raw, err == nil
	},
	reusable: true,
}

// zstdCodec reads a compacted block: the size it decodes to (a uvarint),
// then one zstd frame.
var zstdCodec = blockCodec{
	size: func(blk []byte) (int, bool) {
		n, k := binary.Uvarint(blk)
		return int(min(n, maxBlock+1)), k > 0 && n <= maxBlock
	},
	decode: func(dst, blk []byte) ([]byte, bool) {
		n, k := binary.Uvarint(blk)
		if k <= 0 || n > uint64(cap(dst)) {
			return nil, false
		}
		// A block is one frame: were there a second after it, DecodeAll
		// would decode it too, and the size would not be the one given.
		raw, err := zstdDecoder().DecodeAll(blk[k:], dst[:0])
		return raw, err == nil && uint64(len(raw)) == n
	},
}
