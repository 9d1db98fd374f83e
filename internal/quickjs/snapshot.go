package quickjs

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"context"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/klauspost/compress/s2"
)

// Snapshots.
//
// An idle instance made from an image can be written out as bytes and
// made again from them, in this process or another with the same engine
// and the same image: the pages of its memory that differ from the
// image, its mutable globals, the time its monotonic clock has run and
// its random source. Snapshot bytes hold whatever the program had in
// memory; whoever stores them decides who may read them. This layer checks
// that the bytes are whole and belong to the image; authenticating where
// they came from is the caller's (the sandbox signs them).

// Errors returned by [Image.Resume].
var (
	// ErrSnapshotCorrupt: the bytes are not a whole snapshot.
	ErrSnapshotCorrupt = errors.New("quickjs: snapshot is damaged or not a snapshot")
	// ErrSnapshotImage: the snapshot was taken against another image or
	// another engine build.
	ErrSnapshotImage = errors.New("quickjs: snapshot belongs to another engine build or image")
)

const snapshotMagic = "CMQJSNP2"

// digest identifies the image: the engine build, the memory and the
// globals.
func (img *Image) digest() [32]byte {
	h := sha256.New()
	h.Write([]byte(enginebin.SHA256))
	h.Write(img.mem)
	for i, name := range img.e.globals {
		h.Write([]byte(name))
		_ = binary.Write(h, binary.LittleEndian, img.globals[i])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Portable reports whether snapshots against the image can resume in
// another process: the image was captured from a frozen instance (see
// InstanceConfig.Frozen), so booting the same way elsewhere gives the same
// image.
func (img *Image) Portable() bool { return img.frozen }

// The layout of a snapshot: the magic, the image's digest, S2 blocks each
// preceded by its length (uint32), and a CRC-32C of all that. The first
// block holds the memory's size, the globals, the clock and the random
// source; each later one, records of pages that differ from the image
// (the first page's index, the count, then the pages, each XORed with the
// image's: a page where a run changed a few words is mostly zero bytes,
// which compress to almost nothing). A record never spans blocks, so a
// block is applied to a memory on its own. A compacted snapshot
// (compact.go) has the same layout under its own magic, its blocks in
// zstd.
//
// AppendSnapshot writes one block per range of rangePages pages that has
// a page differing from the image, in order. That makes a block a
// function of its range's pages alone: an instance resumed from an S2
// snapshot keeps each block's compressed bytes and what they decoded to
// (its prior), and its next snapshot copies a block whose pages the step
// did not change instead of compressing it again. Compression is most of
// what a snapshot costs, and a step of a run that holds a large heap
// changes few of its pages. Image.Resume reads any blocking (snapshots
// written before ranges had one block each resume, without reuse).
//
// Blocks of 64 KiB compress within 2% as well as blocks of a megabyte
// on a megabyte of heap, but 10% worse on a hundred (S2 finds no match
// across blocks), so a snapshot with more than maxPrior bytes of pages,
// which no instance keeps to copy from, has blocks of largeRange pages.
// Blocks are also what bound the work: between two, AppendSnapshot checks
// its context and its size limit (BENCHMARKS.md, "Suspending a large
// run").
const (
	rangePages = 16
	// largeRange is the pages of a block in a snapshot with more than
	// maxPrior bytes of pages.
	largeRange = 256
	// maxBlock bounds a block's decoded size: a megabyte of pages, with
	// the record heads it can hold besides (snapshots from before ranges
	// had blocks that large), or the first block (the globals and the
	// random source).
	maxBlock = 1<<20 + 64<<10
	// maxPrior bounds what an instance keeps of the snapshot it was
	// resumed from: a run with more than this many bytes of pages that
	// differ from the image compresses all of them at its next snapshot.
	maxPrior = 16 << 20
)

// SnapshotLimits bound Instance.AppendSnapshot.
type SnapshotLimits struct {
	// Max is the most bytes the snapshot may take; zero means no limit.
	Max int
	// Room is spare capacity to leave after the snapshot, for bytes the
	// caller appends to it.
	Room int
}

// SnapshotSizeError is AppendSnapshot's error for a snapshot that would
// exceed SnapshotLimits.Max; it stopped writing when it did.
type SnapshotSizeError struct {
	// About is the size the whole snapshot would have had, extrapolated
	// from the part written.
	About int64
	Max   int
}

func (e *SnapshotSizeError) Error() string {
	return fmt.Sprintf("quickjs: the snapshot would be about %d bytes, over the limit of %d", e.About, e.Max)
}

// AppendSnapshot appends the instance's state to dst, as bytes that
// Image.Resume turns back into an instance. The instance must be idle and
// made from an image; it is not changed but for its dead stack, which is
// cleared. It stops with ctx's error once ctx ends and with a
// *SnapshotSizeError once the snapshot outgrows lim.Max, checking both
// after every block (see rangePages), and returns nil then. With the
// snapshot it returns its Sum, computed as it was written: a block copied
// from the instance's prior brings its digest along.
func (in *Instance) AppendSnapshot(ctx context.Context, dst []byte, lim SnapshotLimits) ([]byte, [32]byte, error) {
	img := in.img
	if img == nil || in.dead || in.depth != 0 {
		return nil, [32]byte{}, fmt.Errorf("%w: the instance is not an idle instance of an image", ErrNoImage)
	}
	mem := in.mod.Memory()
	buf, ok := mem.Read(0, mem.Size()) // a view of the memory, not a copy
	if !ok {
		return nil, [32]byte{}, ErrDead
	}
	// Below the stack pointer is dead stack, zero in the image: clearing
	// what the run left there keeps it out of the snapshot. The stack
	// grows down, so the walk goes down from the pointer and stops at two
	// zero pages in a row: anything deeper is merely recorded.
	if sp := in.mod.ExportedGlobal("__stack_pointer"); sp != nil {
		if top := int(uint32(sp.Get())); top <= len(buf) {
			zeros := 0
			for end := top; end > 0 && zeros < 2; {
				p := (end - 1) &^ (pageSize - 1)
				if isZero(buf[p:end]) {
					zeros++
				} else {
					zeros = 0
					clear(buf[p:end])
				}
				end = p
			}
		}
	}
	globals, err := in.readGlobals()
	if err != nil {
		return nil, [32]byte{}, err
	}
	// Which pages differ is found first, at memory speed: it tells how much
	// there is to compress, from which the snapshot's size is estimated
	// (to size its buffer, and to say how large it would have been).
	pages := len(buf) / pageSize
	differ := make([]bool, pages)
	total := 0
	for i := range differ {
		if !samePage(buf, img.mem, i) {
			differ[i] = true
			total += pageSize
			if i%rangePages == 0 || !differ[i-1] {
				total += 8 // a record's head
			}
		}
	}
	was := in.prior // what the instance was resumed from
	in.prior = nil
	defer was.release()
	in.forget()
	stage := blockBuffers.get()
	defer blockBuffers.put(stage)
	if cap(stage.b) < maxBlock {
		stage.b = make([]byte, 0, maxBlock)
	}
	b := stage.b[:0]
	le := binary.LittleEndian
	b = le.AppendUint32(b, uint32(len(buf)))
	b = le.AppendUint32(b, uint32(len(globals)))
	for _, g := range globals {
		b = le.AppendUint64(b, g)
	}
	b = le.AppendUint64(b, uint64(time.Since(in.born)))
	b = le.AppendUint64(b, uint64(in.origin))
	if in.originRead {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	rng, _ := in.rng.MarshalBinary()
	b = le.AppendUint32(b, uint32(len(rng)))
	b = append(b, rng...)

	w := &snapWriter{ctx: ctx, out: dst, base: len(dst), summed: len(dst), lim: lim, total: total + len(b)}
	if was != nil {
		// The snapshot the instance resumed from is the best guess at
		// this one's size, and a sixteenth over it stays under the spare
		// room that makes the envelope copy a state to trim it.
		w.guess = was.size + was.size/16
	}
	w.grow(len(snapshotMagic) + len(img.sum))
	w.out = append(w.out, snapshotMagic...)
	w.out = append(w.out, img.sum[:]...)
	w.sums.start()
	w.sums.add(w.out[w.base:])
	if _, err := w.block(b); err != nil {
		return nil, [32]byte{}, err
	}
	// Past maxPrior no instance keeps the blocks to copy, and blocks of a
	// megabyte compress about 10% better than blocks of a range.
	span := rangePages
	if total > maxPrior {
		span = largeRange
	}
	// A snapshot small enough for its instance to be kept warm (warm.go)
	// has its pages written into one buffer, kept with it.
	var kept *byteSlice
	var blocks []keptBlock
	if span == rangePages {
		kept = priorBuffers.get()
		if cap(kept.b) < total {
			kept.b = make([]byte, 0, total)
		}
		kept.b = kept.b[:0]
		defer func() {
			if kept != nil {
				putPrior(kept)
			}
		}()
	}
	for r := 0; r*span < pages; r++ {
		b = stage.b[:0]
		if kept != nil {
			b = kept.b[len(kept.b):len(kept.b):cap(kept.b)]
		}
		for k, end := r*span, min((r+1)*span, pages); k < end; {
			if !differ[k] {
				k++
				continue
			}
			n := 1
			for k+n < end && differ[k+n] {
				n++
			}
			b = le.AppendUint32(b, uint32(k))
			b = le.AppendUint32(b, uint32(n))
			for ; n > 0; n, k = n-1, k+1 {
				b = appendXOR(b, buf[k*pageSize:(k+1)*pageSize], imagePage(img.mem, k))
			}
		}
		if len(b) == 0 {
			continue
		}
		var err error
		var sum [32]byte
		at := len(w.out) - w.base + 4
		if old, ok := was.block(r); ok && span == rangePages && bytes.Equal(old.raw, b) {
			var known *[32]byte
			if old.summed {
				known = &old.sum
			}
			sum, err = w.copyBlock(old.enc, len(b), known)
		} else {
			sum, err = w.block(b)
		}
		if err != nil {
			return nil, [32]byte{}, err
		}
		if kept != nil && cap(b) != cap(kept.b)-len(kept.b) {
			// The pages outgrew the buffer sized for them (they cannot:
			// total counts them): keep nothing rather than pages that are
			// not where the blocks say.
			putPrior(kept)
			kept, blocks = nil, nil
		}
		if kept != nil {
			blocks = append(blocks, keptBlock{r, at, len(w.out) - w.base - at, len(kept.b), len(b), sum})
			kept.b = kept.b[:len(kept.b)+len(b)]
		}
	}
	w.out = le.AppendUint32(w.out, w.crc)
	w.sums.add(w.out[len(w.out)-crcSize:])
	sum := w.sums.sum()
	if w.blocks > maxBlockSegments {
		// (No snapshot has this many: Sum cuts the rest as one segment.)
		sum = Sum(w.out[w.base:])
	}
	if snap := w.out[w.base:]; kept != nil && len(snap) <= maxWarmState {
		own := bytes.Clone(snap)
		p := &prior{buf: kept, size: len(own)}
		for _, k := range blocks {
			p.add(k.r, own[k.enc:k.enc+k.encLen], kept.b[k.raw:k.raw+k.rawLen], &k.sum)
		}
		in.wrote = &written{snap: own, prior: p}
		kept = nil // the instance's now
	}
	return w.out, sum, nil
}

// keptBlock locates a block of a snapshot being written: its range, its
// compressed bytes in the snapshot, its pages in the kept buffer, and
// its segment's digest (see Sum).
type keptBlock struct {
	r, enc, encLen, raw, rawLen int
	sum                         [32]byte
}

// snapWriter compresses a snapshot's blocks straight into the snapshot.
type snapWriter struct {
	ctx    context.Context
	out    []byte
	base   int // where the snapshot starts in out
	lim    SnapshotLimits
	crc    uint32 // of out[base:summed]
	summed int
	total  int // bytes to compress in all
	done   int // bytes compressed so far
	guess  int // the snapshot's likely size, when known before writing
	sums   summer
	blocks int // written so far
}

// block appends raw, compressed, then checks the context and the limit.
// It returns the digest of the block's segment (see Sum).
// It compresses into a reused scratch block and copies what that took: a
// block's worst case is a megabyte, and making room for it in the
// snapshot itself cost every suspension a megabyte or two of fresh,
// zeroed memory, for states that are mostly a few kilobytes.
func (w *snapWriter) block(raw []byte) ([32]byte, error) {
	scratch := encodeBuffers.get()
	defer encodeBuffers.put(scratch)
	if need := s2.MaxEncodedLen(len(raw)); cap(scratch.b) < need {
		scratch.b = make([]byte, s2.MaxEncodedLen(maxBlock))
	}
	return w.copyBlock(s2.Encode(scratch.b[:cap(scratch.b)], raw), len(raw), nil)
}

// copyBlock appends enc, a block compressed from rawLen bytes, then
// checks the context and the limit. known, when not nil, is the digest
// of the block's segment, which is then not hashed again; the digest is
// returned either way.
func (w *snapWriter) copyBlock(enc []byte, rawLen int, known *[32]byte) ([32]byte, error) {
	w.grow(4 + len(enc))
	w.out = binary.LittleEndian.AppendUint32(w.out, uint32(len(enc)))
	w.out = append(w.out, enc...)
	seg := w.out[len(w.out)-4-len(enc):]
	w.blocks++
	w.crc = crc32.Update(w.crc, crcTable, w.out[w.summed:])
	w.summed = len(w.out)
	var d [32]byte
	if known != nil {
		d = *known
		w.sums.record(len(seg), d)
	} else {
		d = w.sums.add(seg)
	}
	w.done += rawLen
	if w.lim.Max > 0 && len(w.out)-w.base > w.lim.Max {
		return d, &SnapshotSizeError{About: w.estimate(), Max: w.lim.Max}
	}
	return d, w.ctx.Err()
}

// encodeBuffers hold one block, compressed.
var encodeBuffers = newBuffers[byteSlice]()

// estimate is the snapshot's size extrapolated from the part written.
func (w *snapWriter) estimate() int64 {
	written := int64(len(w.out) - w.base)
	if w.done == 0 {
		return written
	}
	return written * int64(w.total) / int64(w.done)
}

// grow makes room for need more bytes and the caller's Room. A first touch
// of a page costs more than compressing it, so once a few blocks tell how
// well the memory compresses, the buffer is sized for the whole snapshot,
// and grows again only when that guess was short; before that it doubles
// from a size that holds a small run's state whole. It never grows much
// past the limit, where writing stops.
func (w *snapWriter) grow(need int) {
	want := len(w.out) + need + w.lim.Room
	if cap(w.out) >= want {
		return
	}
	if w.done >= sizeProbe {
		want = max(want, w.base+int(w.estimate()*9/8)+need+w.lim.Room)
	} else {
		want = max(want, 2*cap(w.out), w.base+max(firstSnapshotCap, w.guess)+w.lim.Room)
	}
	if w.lim.Max > 0 {
		want = min(want, max(len(w.out)+need, w.base+w.lim.Max+need)+w.lim.Room)
	}
	out := make([]byte, len(w.out), want)
	copy(out, w.out)
	w.out = out
}

// sizeProbe is how many bytes of pages grow compresses before it trusts
// the ratio it has seen.
const sizeProbe = 2 << 20

// firstSnapshotCap is the snapshot's first size: a run that suspends with
// a small heap fits (its pages differ little from the image's).
const firstSnapshotCap = 64 << 10

// A snapshot ends with a CRC-32C of the rest: it finds damage (a cut, a
// flipped bit) at memory speed. Telling whose bytes they are is for a MAC
// over the whole, which the caller (the sandbox's owner) keeps.
const crcSize = 4

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// buffers keeps a few buffers for reuse: unlike a sync.Pool it is not
// emptied by every collection, and a first touch of a page of a new buffer
// costs page faults.
type buffers[T any] struct {
	free chan *T
}

func newBuffers[T any]() *buffers[T] { return &buffers[T]{free: make(chan *T, 4)} }

func (b *buffers[T]) get() *T {
	select {
	case x := <-b.free:
		return x
	default:
		return new(T)
	}
}

func (b *buffers[T]) put(x *T) {
	select {
	case b.free <- x:
	default:
	}
}

type byteSlice struct{ b []byte }

// blockBuffers hold one block of a snapshot, decoded.
var blockBuffers = newBuffers[byteSlice]()

// imagePage is page i of the image, or nil beyond it (where the image
// reads as zero).
func imagePage(image []byte, i int) []byte {
	if (i+1)*pageSize <= len(image) {
		return image[i*pageSize : (i+1)*pageSize]
	}
	return nil
}

// appendXOR appends page XOR base (page itself when base is nil).
func appendXOR(b, page, base []byte) []byte {
	if base == nil {
		return append(b, page...)
	}
	n := len(b)
	b = b[:n+pageSize]
	subtle.XORBytes(b[n:], page, base)
	return b
}

// xorInto XORs delta into dst (both are whole pages).
func xorInto(dst, delta []byte) { subtle.XORBytes(dst, dst, delta) }

func samePage(buf, image []byte, i int) bool {
	p := buf[i*pageSize : (i+1)*pageSize]
	if (i+1)*pageSize <= len(image) {
		return bytes.Equal(p, image[i*pageSize:(i+1)*pageSize])
	}
	return isZero(p)
}

// Resume makes an instance in the state a snapshot of an instance of this
// image (in any process, when the image is Portable) recorded, serving
// host calls with host. Bytes that are damaged, truncated or taken against
// another image are refused before any of them reaches the engine; pages
// are decoded a block at a time straight into the new instance's memory.
func (img *Image) Resume(ctx context.Context, snap []byte, host HostFunc) (*Instance, error) {
	return img.ResumeSummed(ctx, snap, nil, host)
}

// ResumeSummed is Resume for a snapshot whose block digests the caller
// computed (SumBlocks) to authenticate it: the instance keeps them with
// its blocks, and its next snapshot copies them instead of hashing the
// blocks again. Digests that do not match the snapshot's blocks give a
// next snapshot whose sum is not Sum of its bytes: a state that does not
// open, never another one.
func (img *Image) ResumeSummed(ctx context.Context, snap []byte, digests [][32]byte, host HostFunc) (*Instance, error) {
	head := len(snapshotMagic) + sha256.Size
	if len(snap) < head+crcSize {
		return nil, ErrSnapshotCorrupt
	}
	var codec *blockCodec
	switch string(snap[:len(snapshotMagic)]) {
	case snapshotMagic:
		codec = &s2Codec
	case compactMagic:
		codec = &zstdCodec
	default:
		return nil, ErrSnapshotCorrupt
	}
	body, sum := snap[:len(snap)-crcSize], snap[len(snap)-crcSize:]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(sum) {
		return nil, ErrSnapshotCorrupt
	}
	if !bytes.Equal(body[len(snapshotMagic):head], img.sum[:]) {
		return nil, ErrSnapshotImage
	}
	// Every block's length, and what it decodes to, before anything is
	// decoded: a snapshot cannot ask for more than the memory it restores.
	var blocks [][]byte
	var sizes []int
	limit := int64(reservation(img.e, img.cfg.MemoryLimit)) + 1<<20
	var decoded int64
	for rest := body[head:]; len(rest) > 0; {
		blk, ok := nextBlock(&rest)
		if !ok {
			return nil, ErrSnapshotCorrupt
		}
		size, ok := codec.size(blk)
		if decoded += int64(size); !ok || size > maxBlock || decoded > limit {
			return nil, ErrSnapshotCorrupt
		}
		blocks = append(blocks, blk)
		sizes = append(sizes, size)
	}
	if len(blocks) == 0 {
		return nil, ErrSnapshotCorrupt
	}
	if len(digests) != len(blocks) {
		digests = nil // not this snapshot's
	}
	dec := blockBuffers.get()
	defer blockBuffers.put(dec)
	if cap(dec.b) < maxBlock {
		dec.b = make([]byte, 0, maxBlock)
	}
	raw, ok := codec.decode(dec.b, blocks[0])
	if !ok {
		return nil, ErrSnapshotCorrupt
	}
	r := bytes.NewReader(raw)
	rd := func(v any) bool { return binary.Read(r, binary.LittleEndian, v) == nil }
	var size, nglobals uint32
	if !rd(&size) || !rd(&nglobals) || nglobals != uint32(len(img.globals)) ||
		size%65536 != 0 || int(size) < len(img.mem) || uint64(size) > reservation(img.e, img.cfg.MemoryLimit) {
		return nil, ErrSnapshotCorrupt
	}
	globals := make([]uint64, nglobals)
	for i := range globals {
		if !rd(&globals[i]) {
			return nil, ErrSnapshotCorrupt
		}
	}
	var elapsed, origin int64
	var originRead bool
	var rngLen uint32
	if !rd(&elapsed) || !rd(&origin) || !rd(&originRead) || !rd(&rngLen) || rngLen > 256 {
		return nil, ErrSnapshotCorrupt
	}
	rngState := make([]byte, rngLen)
	if _, err := io.ReadFull(r, rngState); err != nil || r.Len() != 0 {
		return nil, ErrSnapshotCorrupt
	}
	var rng rand.ChaCha8
	if rng.UnmarshalBinary(rngState) != nil {
		return nil, ErrSnapshotCorrupt
	}
	if w := img.takeWarm(snap); w != nil {
		in, err := img.resumeWarm(ctx, w, host, globals)
		if err != nil {
			return nil, err
		}
		in.born = time.Now().Add(-time.Duration(elapsed))
		in.origin, in.originRead = origin, originRead
		in.rng = &rng
		return in, nil
	}
	in, err := img.newInstance(ctx, host, int(size))
	if err != nil {
		return nil, err
	}
	m := in.mod.Memory()
	if grow := size/65536 - m.Size()/65536; grow > 0 {
		if _, ok := m.Grow(grow); !ok {
			in.Close()
			return nil, fmt.Errorf("%w: snapshot of %d bytes", ErrOutOfMemory, size)
		}
	}
	buf, ok := m.Read(0, m.Size())
	if !ok {
		in.Close()
		return nil, ErrDead
	}
	// The new instance reads as the image (and zero beyond it) but for the
	// random seed NewInstance gave it; with that put back, XOR with the
	// recorded differences gives the snapshot's memory.
	rs := img.e.randomState
	copy(buf[rs:rs+8], img.mem[rs:rs+8])
	// Pages are decoded into one buffer, kept with a copy of the blocks as
	// the instance's prior (see rangePages), when the snapshot is S2 and
	// not too large; into one block's buffer, reused, when it is not.
	if pagesLen := int(decoded) - len(raw); codec.reusable && pagesLen <= maxPrior {
		if digests != nil {
			digests = digests[1:]
		}
		if !in.resumePrior(buf, snap, blocks[1:], sizes[1:], digests, pagesLen) {
			in.Close()
			return nil, ErrSnapshotCorrupt
		}
	} else {
		for _, blk := range blocks[1:] {
			if raw, ok = codec.decode(dec.b, blk); !ok || !applyPages(buf, raw) {
				// The CRC held, so the bytes are as written: only a
				// writer with another idea of the layout gets here. The
				// instance never ran.
				in.Close()
				return nil, ErrSnapshotCorrupt
			}
		}
	}
	if err := setGlobals(in.mod, img.e.globals, globals); err != nil {
		in.Close()
		return nil, err
	}
	in.born = time.Now().Add(-time.Duration(elapsed))
	in.origin, in.originRead = origin, originRead
	in.rng = &rng
	return in, nil
}

// resumePrior decodes an S2 snapshot's blocks of pages (whose sizes
// are decoded sizes, pagesLen in all) into one buffer, XORs them into
// memory and keeps them, and a copy of each block (with its digest, when
// digests has them), as the instance's prior. It reports false when a block does not decode to its size or
// does not fit memory.
//
// A megabyte of pages takes most of a millisecond to decode, so past
// parallelDecode bytes the second half of the blocks is decoded on
// another goroutine, into its own part of the buffer; the XOR into
// memory stays on this one.
func (in *Instance) resumePrior(mem, snap []byte, blocks [][]byte, sizes []int, digests [][32]byte, pagesLen int) bool {
	encLen := 0
	for _, blk := range blocks {
		encLen += len(blk)
	}
	keep := priorBuffers.get()
	if cap(keep.b) < pagesLen+encLen {
		keep.b = make([]byte, pagesLen+encLen)
	}
	keep.b = keep.b[:pagesLen+encLen]
	in.prior = &prior{buf: keep, size: len(snap)}
	raws := make([][]byte, len(blocks))
	decode := func(from, to, at int) bool {
		for i := from; i < to; i++ {
			raw, err := s2.Decode(keep.b[at:at+sizes[i]], blocks[i])
			if err != nil || len(raw) != sizes[i] {
				return false
			}
			raws[i], at = raw, at+sizes[i]
		}
		return true
	}
	half, at := len(blocks), 0 // the second half's first block, and where it goes
	if pagesLen >= parallelDecode && runtime.GOMAXPROCS(0) > 1 {
		for half = 0; at < pagesLen/2; half++ {
			at += sizes[half]
		}
	}
	ok := true
	if half < len(blocks) {
		var wg sync.WaitGroup
		var second bool
		wg.Go(func() { second = decode(half, len(blocks), at) })
		ok = decode(0, half, 0)
		wg.Wait()
		ok = ok && second
	} else {
		ok = decode(0, len(blocks), 0)
	}
	if !ok {
		return false
	}
	last, kept := -1, pagesLen
	for i, raw := range raws {
		if !applyPages(mem, raw) {
			return false
		}
		if r, ok := blockRange(raw); ok && r > last {
			// A copy: the caller's bytes are theirs again once Resume
			// returns, and the instance may snapshot later.
			enc := keep.b[kept : kept+copy(keep.b[kept:], blocks[i])]
			kept += len(enc)
			var sum *[32]byte
			if digests != nil {
				sum = &digests[i]
			}
			in.prior.add(r, enc, raw, sum)
			last = r
		}
	}
	return true
}

// parallelDecode is how many bytes of pages a snapshot has before
// resumePrior decodes them on two goroutines.
const parallelDecode = 256 << 10

// nextBlock cuts the next block (its uint32 length, then its bytes) off
// rest, reporting false when rest does not hold a whole one.
func nextBlock(rest *[]byte) ([]byte, bool) {
	r := *rest
	if len(r) < 4 {
		return nil, false
	}
	n := binary.LittleEndian.Uint32(r)
	if uint64(n) > uint64(len(r)-4) {
		return nil, false
	}
	*rest = r[4+n:]
	return r[4 : 4+n], true
}

// blockRange reports the range (see rangePages) that all of a block's
// records lie in, or false when they span more than one. raw is a block
// applyPages accepted.
func blockRange(raw []byte) (int, bool) {
	le := binary.LittleEndian
	r := int(le.Uint32(raw)) / rangePages
	for len(raw) > 0 {
		first, n := int(le.Uint32(raw)), int(le.Uint32(raw[4:]))
		if first/rangePages != r || (first+n-1)/rangePages != r {
			return 0, false
		}
		raw = raw[8+n*pageSize:]
	}
	return r, true
}

// prior is what an instance was resumed from, by range: each block's
// compressed bytes (in the snapshot Resume read) and what they decoded to
// (in buf, which is the instance's until its next snapshot).
type prior struct {
	blocks []priorBlock
	buf    *byteSlice
	size   int // the snapshot's length
}

// priorBlock is a block: its compressed bytes, its pages and, when
// summed, the digest of its segment (see Sum), which a block decoded
// from a state does not have: it is hashed when first copied.
type priorBlock struct {
	enc, raw []byte
	sum      [32]byte
	summed   bool
}

func (p *prior) add(r int, enc, raw []byte, sum *[32]byte) {
	if r >= len(p.blocks) {
		p.blocks = append(p.blocks, make([]priorBlock, r+1-len(p.blocks))...)
	}
	b := priorBlock{enc: enc, raw: raw}
	if sum != nil {
		b.sum, b.summed = *sum, true
	}
	p.blocks[r] = b
}

// block is range r's block, if the snapshot had one of its own.
func (p *prior) block(r int) (priorBlock, bool) {
	if p == nil || r >= len(p.blocks) || p.blocks[r].enc == nil {
		return priorBlock{}, false
	}
	return p.blocks[r], true
}

// release gives the buffer back; p is not used again.
func (p *prior) release() {
	if p != nil {
		putPrior(p.buf)
	}
}

// releasePrior releases the instance's prior, if it has one.
func (in *Instance) releasePrior() {
	in.prior.release()
	in.prior = nil
}

// putPrior gives a page buffer back to the pool, when it is small enough
// to keep.
func putPrior(b *byteSlice) {
	if cap(b.b) <= maxPooledPrior {
		priorBuffers.put(b)
	}
}

// maxPooledPrior is the largest prior buffer kept for reuse: the pool
// would otherwise hold on to four of the largest runs' buffers for good.
const maxPooledPrior = 4 << 20

// priorBuffers hold a resumed instance's decoded pages.
var priorBuffers = newBuffers[byteSlice]()

// applyPages XORs a block's records of pages into memory, reporting false
// when they do not fit it.
func applyPages(mem, raw []byte) bool {
	le := binary.LittleEndian
	for len(raw) > 0 {
		if len(raw) < 8 {
			return false
		}
		first, n := uint64(le.Uint32(raw)), uint64(le.Uint32(raw[4:]))
		raw = raw[8:]
		if n == 0 || (first+n)*pageSize > uint64(len(mem)) || n*pageSize > uint64(len(raw)) {
			return false
		}
		xorInto(mem[first*pageSize:(first+n)*pageSize], raw[:n*pageSize])
		raw = raw[n*pageSize:]
	}
	return true
}

// Digest identifies the image's contents (and the engine build): two
// images with the same digest accept each other's snapshots.
func (img *Image) Digest() [32]byte { return img.sum }
