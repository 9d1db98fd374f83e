package quickjs

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Sums.
//
// A snapshot is authenticated by its holder (the sandbox's caller MACs
// it), and a MAC over all of it costs as much as compressing the blocks
// a step changed: most of a step's cost once unchanged blocks are copied.
// Sum is a digest of the snapshot made of one digest per block, so the
// snapshot that copies a block copies its digest too, and only the
// blocks written anew are hashed. The caller MACs the 32 bytes of the sum
// instead of the snapshot.
//
// Sum is defined over any bytes, snapshot or not: they are cut into
// segments — the head (magic and image digest), each block with its
// length, the CRC, and when the lengths do not frame the rest, the rest
// as one segment — and the sum is the SHA-256 of every segment's length
// and SHA-256, in order. The segments are a function of the bytes and
// cover them exactly, so two byte strings with one sum have the same
// segments, hence (short of a SHA-256 collision) are the same bytes:
// nothing about the bytes is trusted to compute it, and a damaged
// snapshot has a sum as any other bytes do.

// sumDomain starts every sum: it is a digest of this construction only.
const sumDomain = "codemode snapshot sum 1\x00"

// maxBlockSegments bounds the blocks Sum hashes one by one; past them,
// the rest is one segment. Bytes that are all empty blocks (four zero
// bytes each) would otherwise cost a digest per four bytes, seconds for
// a large state, before its MAC refuses it. A snapshot has at most 4,097
// blocks (see rangePages): a block per range for 16 MiB of pages, or a
// block per megabyte of 4 GiB.
const maxBlockSegments = 1 << 13

// Sum returns the digest of snap that AppendSnapshot returned with it.
func Sum(snap []byte) [32]byte {
	sum, _, _ := sumSegments(snap)
	return sum
}

// SumBlocks is Sum, with the digest of each of snap's blocks in order
// (nil when its blocks do not frame it): a caller that authenticated
// snap by its sum hands them to ResumeSummed, so that the resumed
// instance's next snapshot does not hash its blocks again.
func SumBlocks(snap []byte) ([32]byte, [][32]byte) {
	sum, _, blocks := sumSegments(snap)
	return sum, blocks
}

// sumSegments is Sum, how many segments it cut and, when every segment
// between the head and the CRC is a framed block, their digests.
func sumSegments(snap []byte) ([32]byte, int, [][32]byte) {
	var s summer
	s.start()
	head := len(snapshotMagic) + sha256.Size
	if len(snap) < head+crcSize {
		s.add(snap)
		return s.sum(), 1, nil
	}
	s.add(snap[:head])
	segs := 1
	var digests [][32]byte
	framed := true
	rest := snap[head : len(snap)-crcSize]
	for blocks := 0; len(rest) > 0; blocks++ {
		n := len(rest) // unless framed, the rest is one segment
		isBlock := false
		if len(rest) >= 4 && blocks < maxBlockSegments {
			if l := binary.LittleEndian.Uint32(rest); uint64(l) <= uint64(len(rest)-4) {
				n, isBlock = 4+int(l), true
			}
		}
		d := s.add(rest[:n])
		framed = framed && isBlock
		if framed {
			digests = append(digests, d)
		}
		segs++
		rest = rest[n:]
	}
	s.add(snap[len(snap)-crcSize:])
	if !framed {
		digests = nil
	}
	return s.sum(), segs + 1, digests
}

// summer accumulates a sum segment by segment.
type summer struct{ h hash.Hash }

func (s *summer) start() {
	s.h = sha256.New()
	s.h.Write([]byte(sumDomain))
}

// add hashes a segment and records it.
func (s *summer) add(seg []byte) [32]byte {
	d := sha256.Sum256(seg)
	s.record(len(seg), d)
	return d
}

// record records a segment of n bytes whose SHA-256 is d.
func (s *summer) record(n int, d [32]byte) {
	var rec [8 + sha256.Size]byte
	binary.LittleEndian.PutUint64(rec[:], uint64(n))
	copy(rec[8:], d[:])
	s.h.Write(rec[:])
}

func (s *summer) sum() [32]byte {
	var out [32]byte
	s.h.Sum(out[:0])
	return out
}
