package quickjs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"time"

	"context"

	"github.com/codemode-go/codemode/internal/engine"
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

const snapshotMagic = "CMQJSNP1"

// digest identifies the image: the engine build, the memory and the
// globals.
func (img *Image) digest() [32]byte {
	h := sha256.New()
	h.Write([]byte(engine.SHA256))
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

// Snapshot writes the instance's state as bytes that Image.Resume turns
// back into an instance. The instance must be idle and made from an image;
// it is not changed.
func (in *Instance) Snapshot() ([]byte, error) {
	img := in.img
	if img == nil || in.dead || in.depth != 0 {
		return nil, fmt.Errorf("%w: the instance is not an idle instance of an image", ErrNoImage)
	}
	mem := in.mod.Memory()
	buf, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil, ErrDead
	}
	// Buffers are reused: on the machines measured, a first touch of a
	// page of new memory costs more than compressing it.
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
	raw := rawBuffers.get()
	defer rawBuffers.put(raw)
	raw.Reset()
	w := func(v any) { _ = binary.Write(raw, binary.LittleEndian, v) }
	w(uint32(len(buf)))
	globals, err := in.readGlobals()
	if err != nil {
		return nil, err
	}
	w(uint32(len(globals)))
	w(globals)
	w(int64(time.Since(in.born)))
	w(in.origin)
	w(in.originRead)
	rng, _ := in.rng.MarshalBinary()
	w(uint32(len(rng)))
	raw.Write(rng)
	// Runs of pages that differ from the image (or lie beyond it and are
	// not zero), each written as its XOR with the image: a page where a
	// run changed a few words is mostly zero bytes, which compress to
	// almost nothing.
	pages := len(buf) / pageSize
	for i := 0; i < pages; {
		if samePage(buf, img.mem, i) {
			i++
			continue
		}
		j := i + 1
		for j < pages && !samePage(buf, img.mem, j) {
			j++
		}
		w(uint32(i))
		w(uint32(j - i))
		for k := i; k < j; k++ {
			writeXOR(raw, buf[k*pageSize:(k+1)*pageSize], imagePage(img.mem, k))
		}
		i = j
	}
	enc := encBuffers.get()
	defer encBuffers.put(enc)
	enc.b = s2.Encode(enc.b[:cap(enc.b)], raw.Bytes())
	out := make([]byte, 0, len(snapshotMagic)+len(img.sum)+len(enc.b)+crcSize)
	out = append(out, snapshotMagic...)
	out = append(out, img.sum[:]...)
	out = append(out, enc.b...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crcTable)), nil
}

// A snapshot ends with a CRC-32C of the rest: it finds damage (a cut, a
// flipped bit) at memory speed. Telling whose bytes they are is for a MAC
// over the whole, which the caller (the sandbox's owner) keeps.
const crcSize = 4

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// buffers keeps a few buffers of snapshot size for reuse: unlike a
// sync.Pool it is not emptied by every collection, and a snapshot's
// buffers are megabytes whose first touch costs page faults.
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

var (
	rawBuffers = newBuffers[bytes.Buffer]()
	encBuffers = newBuffers[byteSlice]()
)

// imagePage is page i of the image, or nil beyond it (where the image
// reads as zero).
func imagePage(image []byte, i int) []byte {
	if (i+1)*pageSize <= len(image) {
		return image[i*pageSize : (i+1)*pageSize]
	}
	return nil
}

// writeXOR writes page XOR base (page itself when base is nil).
func writeXOR(w *bytes.Buffer, page, base []byte) {
	if base == nil {
		w.Write(page)
		return
	}
	var tmp [pageSize]byte
	for k := 0; k < pageSize; k += 8 {
		binary.LittleEndian.PutUint64(tmp[k:], binary.LittleEndian.Uint64(page[k:])^binary.LittleEndian.Uint64(base[k:]))
	}
	w.Write(tmp[:])
}

// xorInto XORs delta into dst, eight bytes at a time (both are whole pages).
func xorInto(dst, delta []byte) {
	for k := 0; k+8 <= len(delta); k += 8 {
		binary.LittleEndian.PutUint64(dst[k:], binary.LittleEndian.Uint64(dst[k:])^binary.LittleEndian.Uint64(delta[k:]))
	}
}

func samePage(buf, image []byte, i int) bool {
	p := buf[i*pageSize : (i+1)*pageSize]
	if (i+1)*pageSize <= len(image) {
		return bytes.Equal(p, image[i*pageSize:(i+1)*pageSize])
	}
	return isZero(p)
}

// Resume makes an instance in the state a Snapshot of an instance of this
// image (in any process, when the image is Portable) recorded, serving
// host calls with host. Bytes that are damaged, truncated or taken against
// another image are refused before any of them reaches the engine.
func (img *Image) Resume(ctx context.Context, snap []byte, host HostFunc) (*Instance, error) {
	head := len(snapshotMagic) + sha256.Size
	if len(snap) < head+crcSize || string(snap[:len(snapshotMagic)]) != snapshotMagic {
		return nil, ErrSnapshotCorrupt
	}
	body, sum := snap[:len(snap)-crcSize], snap[len(snap)-crcSize:]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(sum) {
		return nil, ErrSnapshotCorrupt
	}
	if !bytes.Equal(body[len(snapshotMagic):head], img.sum[:]) {
		return nil, ErrSnapshotImage
	}
	limit := int64(reservation(img.e, img.cfg.MemoryLimit)) + 1<<20
	n, err := s2.DecodedLen(body[head:])
	if err != nil || int64(n) > limit {
		return nil, ErrSnapshotCorrupt
	}
	dec := encBuffers.get()
	defer encBuffers.put(dec)
	if cap(dec.b) < n {
		dec.b = make([]byte, n)
	}
	raw, err := s2.Decode(dec.b[:cap(dec.b)], body[head:])
	if err != nil {
		return nil, ErrSnapshotCorrupt
	}
	dec.b = raw[:cap(raw)]
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
	if _, err := io.ReadFull(r, rngState); err != nil {
		return nil, ErrSnapshotCorrupt
	}
	var rng rand.ChaCha8
	if rng.UnmarshalBinary(rngState) != nil {
		return nil, ErrSnapshotCorrupt
	}
	type run struct{ first, n uint32 }
	var runs []run
	var data [][]byte
	for r.Len() > 0 {
		var x run
		if !rd(&x.first) || !rd(&x.n) || x.n == 0 || uint64(x.first+x.n)*pageSize > uint64(size) || x.first+x.n < x.first {
			return nil, ErrSnapshotCorrupt
		}
		at := len(raw) - r.Len()
		end := at + int(x.n)*pageSize
		if end > len(raw) {
			return nil, ErrSnapshotCorrupt
		}
		runs = append(runs, x)
		data = append(data, raw[at:end])
		_, _ = r.Seek(int64(end), io.SeekStart)
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
	for i, x := range runs {
		xorInto(buf[int(x.first)*pageSize:], data[i])
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

// Digest identifies the image's contents (and the engine build): two
// images with the same digest accept each other's snapshots.
func (img *Image) Digest() [32]byte { return img.sum }
