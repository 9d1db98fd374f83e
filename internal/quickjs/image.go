package quickjs

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// Instance images.
//
// Booting an instance (creating the engine's runtime and context, then
// whatever the owner loads into it) costs about a millisecond; an idle
// instance's whole state is its linear memory and its mutable globals,
// since no guest frame is active. An Image is that state, captured once;
// every instance made from it starts exactly there, with nothing of
// another instance's making.
//
// Page faults, not copying, are the cost of a fresh instance: on the
// machines measured a first touch of a page costs about 11 µs, so filling
// a new 1.4 MiB memory costs milliseconds while copying the image over a
// memory already in use costs about 20 µs. An Image therefore keeps the
// instances its runs are done with (when they did not grow their memory)
// and resets them to the image: the dead stack below the stack pointer is
// cleared and the rest copied back, the globals set. Only runs that grew
// their memory, or died, cost a new wasm instance.
//
// RATIONALE.md, "Why instances from an image?", has the measurements.

// Image is the captured state of an idle instance; see
// [Instance.Capture]. It is safe for concurrent use.
type Image struct {
	e      *Engine
	cfg    InstanceConfig
	frozen bool     // captured from a frozen instance: the same in every process
	sum    [32]byte // identifies the image's contents; see snapshot.go

	mem     []byte   // linear memory at capture; zero below live
	live    uint32   // the stack pointer, rounded down to a page
	pages   [][2]int // the non-zero page runs of mem above live
	globals []uint64 // the values of Engine.globals
	global  Value
	scratch uint32
	origin  int64
	read    bool // origin was read

	mu     sync.Mutex
	spares []*Instance // reset, waiting to be handed out
	// grown are reset instances whose memory grew past the image's: the
	// image's pages, zero beyond. A snapshot of their size resumes on one
	// without growing a memory (a page fault per page).
	grown []*Instance
	// warm are instances kept unreset for a resume of the snapshot they
	// wrote last (warm.go).
	warm   []*Instance
	closed bool
}

// maxSpares bounds the reset instances an Image keeps, and maxGrown
// those of them whose memory grew.
const (
	maxSpares = 4
	maxGrown  = 2
)

// ErrNoImage is returned by [Instance.Capture] when the instance's state
// cannot be captured.
var ErrNoImage = errors.New("quickjs: the instance cannot be captured as an image")

// Capture returns an image of the instance as it is now. The instance must
// be idle (no export running) and alive; it is not changed and stays
// usable. Values the caller holds (Global, boxes it made) are valid in
// every instance made from the image.
func (in *Instance) Capture() (*Image, error) {
	if in.dead || in.depth != 0 {
		return nil, fmt.Errorf("%w: it is dead or running", ErrNoImage)
	}
	if in.e.randomState == 0 || in.e.cfg.Stop != StopFuel {
		return nil, fmt.Errorf("%w: the engine does not support images (loop fuel and a known random state are needed)", ErrNoImage)
	}
	mem := in.mod.Memory()
	buf, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil, ErrDead
	}
	img := &Image{
		frozen:  in.cfg.Frozen,
		e:       in.e,
		cfg:     in.cfg,
		mem:     bytes.Clone(buf),
		global:  in.global,
		scratch: in.scratch,
		origin:  in.origin,
		read:    in.originRead,
	}
	var err error
	if img.globals, err = in.readGlobals(); err != nil {
		return nil, err
	}
	if sp := in.mod.ExportedGlobal("__stack_pointer"); sp != nil {
		img.live = uint32(sp.Get()) &^ (pageSize - 1)
	}
	if img.live == 0 || int(img.live) > len(img.mem) {
		return nil, fmt.Errorf("%w: no stack pointer", ErrNoImage)
	}
	// Below the stack pointer is dead stack: zero in the image, so every
	// instance starts with the same bytes, none of them left over.
	clear(img.mem[:img.live])
	for p := int(img.live); p < len(img.mem); p += pageSize {
		if isZero(img.mem[p : p+pageSize]) {
			continue
		}
		if n := len(img.pages); n > 0 && img.pages[n-1][1] == p {
			img.pages[n-1][1] = p + pageSize
		} else {
			img.pages = append(img.pages, [2]int{p, p + pageSize})
		}
	}
	img.sum = img.digest()
	in.e.mu.Lock()
	in.e.images = append(in.e.images, img)
	in.e.mu.Unlock()
	return img, nil
}

const pageSize = 4096

func isZero(b []byte) bool {
	for len(b) >= 64 {
		le := binary.LittleEndian
		if le.Uint64(b)|le.Uint64(b[8:])|le.Uint64(b[16:])|le.Uint64(b[24:])|
			le.Uint64(b[32:])|le.Uint64(b[40:])|le.Uint64(b[48:])|le.Uint64(b[56:]) != 0 {
			return false
		}
		b = b[64:]
	}
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// NewInstance returns an instance in the image's state, serving host calls
// with host. Like [Engine.NewInstance], ctx bounds it. Its Math.random and
// crypto random sources are its own, and its monotonic clock starts where
// the captured one stood.
func (img *Image) NewInstance(ctx context.Context, host HostFunc) (*Instance, error) {
	return img.newInstance(ctx, host, len(img.mem))
}

// newInstance is NewInstance, preferring a kept instance whose memory has
// size bytes (the image's, or a grown one's).
func (img *Image) newInstance(ctx context.Context, host HostFunc, size int) (*Instance, error) {
	e := img.e
	if err := e.addLive(); err != nil {
		return nil, err
	}
	img.mu.Lock()
	var spare *Instance
	if n := len(img.spares); n > 0 && size == len(img.mem) {
		spare = img.spares[n-1]
		img.spares = img.spares[:n-1]
	}
	for i, g := range img.grown {
		if spare == nil && int(g.mod.Memory().Size()) == size {
			spare = g
			img.grown = append(img.grown[:i], img.grown[i+1:]...)
			break
		}
	}
	img.mu.Unlock()
	var in *Instance
	var err error
	if spare != nil {
		in = img.adopt(ctx, spare.mod, spare.mem, spare)
	} else {
		in, err = img.clone(ctx)
	}
	if err != nil {
		e.live.Done()
		return nil, err
	}
	in.counted = true
	in.host = host
	if err := in.reseed(); err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

// adopt makes the Go side of an instance of the image around a module
// and its memory.
func (img *Image) adopt(ctx context.Context, mod api.Module, mem *reservedMemory, prev *Instance) *Instance {
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	ctx, cancel := context.WithCancel(ctx)
	cfg := img.cfg
	cfg.Frozen = false
	in := &Instance{
		e:          img.e,
		img:        img,
		cfg:        cfg,
		cancel:     cancel,
		mem:        mem,
		mod:        mod,
		born:       time.Now().Add(-time.Duration(img.origin)),
		origin:     img.origin,
		originRead: img.read,
		rng:        rand.NewChaCha8(seed),
		global:     img.global,
		scratch:    img.scratch,
	}
	in.ctx = context.WithValue(ctx, instanceKey{}, in)
	if prev != nil {
		in.exports, in.stacks = prev.exports, prev.stacks
	}
	return in
}

// clone makes a new wasm instance in the image's state.
func (img *Image) clone(ctx context.Context) (in *Instance, err error) {
	e := img.e
	mem, err := newReservedMemory(reservation(e, img.cfg.MemoryLimit))
	if err != nil {
		return nil, fmt.Errorf("quickjs: reserve linear memory: %w", err)
	}
	allocCtx := experimental.WithMemoryAllocator(ctx,
		experimental.MemoryAllocatorFunc(func(_, _ uint64) experimental.LinearMemory { return mem }))
	mod, err := e.runtime.InstantiateModule(allocCtx, e.compiled,
		wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		mem.release()
		return nil, fmt.Errorf("quickjs: instantiate: %w", err)
	}
	in = img.adopt(ctx, mod, mem, nil)
	defer func() {
		if err != nil {
			in.Close()
			in = nil
		}
	}()
	m := mod.Memory()
	if want := uint32(len(img.mem) / 65536); m.Size()/65536 < want {
		if _, ok := m.Grow(want - m.Size()/65536); !ok {
			return nil, fmt.Errorf("%w: image of %d bytes", ErrOutOfMemory, len(img.mem))
		}
	}
	buf, ok := m.Read(0, m.Size())
	if !ok || len(buf) != len(img.mem) {
		return nil, ErrNoImage
	}
	// A new memory is zero but for the data segments: restore writes only
	// the pages the image has data on and those the segments wrote.
	img.restore(buf)
	if err := setGlobals(mod, img.e.globals, img.globals); err != nil {
		return nil, err
	}
	if err := in.bindExports(); err != nil {
		return nil, err
	}
	return in, nil
}

// restore makes a memory of the image's size (a new one, or one a run
// used) read as the image: pages the image has data on are copied, and
// other pages are cleared if they hold anything. Writing a page that was
// never touched costs a page fault (about 11 µs where measured, more than
// a whole reset otherwise), so pages that are not resident are not even
// read: they still read as zero.
func (img *Image) restore(buf []byte) {
	pages := len(buf) / pageSize
	vec := make([]byte, pages)
	if !residentPages(buf, vec) {
		for i := range vec {
			vec[i] = 1
		}
	}
	next := 0 // index into img.pages
	for i := 0; i < pages; i++ {
		p := i * pageSize
		for next < len(img.pages) && img.pages[next][1] <= p {
			next++
		}
		switch {
		case next < len(img.pages) && img.pages[next][0] <= p:
			copy(buf[p:p+pageSize], img.mem[p:p+pageSize])
		case vec[i] != 0 && !isZero(buf[p:p+pageSize]):
			clear(buf[p : p+pageSize])
		}
	}
}

// setGlobals sets the instance's mutable globals (Engine.globals) to values.
func setGlobals(mod api.Module, names []string, values []uint64) error {
	for i, name := range names {
		g, ok := mod.ExportedGlobal(name).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("%w: global %q", ErrNoImage, name)
		}
		g.Set(values[i])
	}
	return nil
}

// readGlobals returns the values of the instance's mutable globals.
func (in *Instance) readGlobals() ([]uint64, error) {
	values := make([]uint64, len(in.e.globals))
	for i, name := range in.e.globals {
		g := in.mod.ExportedGlobal(name)
		if g == nil {
			return nil, fmt.Errorf("%w: global %q", ErrNoImage, name)
		}
		values[i] = g.Get()
	}
	return values, nil
}

// reseed gives the instance a Math.random state of its own.
func (in *Instance) reseed() error {
	var b [8]byte
	for binary.LittleEndian.Uint64(b[:]) == 0 { // xorshift64* needs a state other than 0
		_, _ = crand.Read(b[:])
	}
	if !in.mod.Memory().Write(in.e.randomState, b[:]) {
		return ErrDead
	}
	return nil
}

// recycle resets a finished instance of the image and keeps it for a
// later NewInstance. It reports false when the instance cannot be reused:
// it died, was killed, is running, or grew its memory.
func (img *Image) recycle(in *Instance) bool {
	if img.parkWarm(in) {
		return true
	}
	in.forget()
	if in.dead || in.killed.Load() || in.depth != 0 || in.mod == nil {
		return false
	}
	return img.reset(in)
}

// reset makes an instance's memory and globals the image's again and
// keeps it, reporting false when the image keeps enough.
func (img *Image) reset(in *Instance) bool {
	m := in.mod.Memory()
	grown := int(m.Size()) > len(img.mem)
	full := func() bool {
		return img.closed || len(img.spares) >= maxSpares || grown && len(img.grown) >= maxGrown
	}
	img.mu.Lock()
	f := full()
	img.mu.Unlock()
	if f || int(m.Size()) < len(img.mem) {
		return false
	}
	buf, ok := m.Read(0, m.Size())
	if !ok {
		return false
	}
	img.restore(buf)
	if setGlobals(in.mod, img.e.globals, img.globals) != nil {
		return false
	}
	img.mu.Lock()
	defer img.mu.Unlock()
	if full() {
		return false
	}
	// Only the wasm instance is kept (adopt wraps it anew): the host
	// function would keep the finished run, and all it holds, alive.
	in.host = nil
	if grown {
		img.grown = append(img.grown, in)
	} else {
		img.spares = append(img.spares, in)
	}
	return true
}

// Close releases the instances the image keeps. Instances made from it
// stay usable; what they give back afterwards is closed.
func (img *Image) Close() {
	img.e.mu.Lock()
	for i, other := range img.e.images {
		if other == img {
			img.e.images = append(img.e.images[:i], img.e.images[i+1:]...)
			break
		}
	}
	img.e.mu.Unlock()
	img.mu.Lock()
	spares := append(append(img.spares, img.grown...), img.warm...)
	img.spares, img.grown, img.warm, img.closed = nil, nil, nil, true
	img.mu.Unlock()
	for _, in := range spares {
		in.forget()
		in.closeModule()
	}
}

// reservation is the hard cap of an instance's linear memory for an
// engine memory limit: the limit, plus room for the engine's static data,
// its C stack and allocator overhead.
func reservation(e *Engine, limit uint64) uint64 {
	capBytes := limit + limit/4 + 8<<20
	if capBytes > e.cfg.MaxMemoryBytes {
		capBytes = e.cfg.MaxMemoryBytes
	}
	return (capBytes + 65535) &^ 65535
}

// Spares reports how many reset instances the image holds.
func (img *Image) Spares() int {
	img.mu.Lock()
	defer img.mu.Unlock()
	return len(img.spares)
}

// Prepare makes one new instance ahead of demand, so the next
// NewInstance does not wait for it.
func (img *Image) Prepare(ctx context.Context) error {
	in, err := img.clone(ctx)
	if err != nil {
		return err
	}
	in.dead = true // this handle is never used; NewInstance adopts the module
	img.mu.Lock()
	keep := !img.closed && len(img.spares) < maxSpares
	if keep {
		img.spares = append(img.spares, in)
	}
	img.mu.Unlock()
	if !keep {
		in.closeModule()
	}
	return nil
}
