package sandbox

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/codemode-go/codemode/internal/quickjs"
)

// Runs start on instances made from an image. Booting an instance
// (creating it, loading the prelude, installing the bindings, warming it
// up) takes about a millisecond; a configuration's image captures a booted
// instance once, and every later run gets an instance in exactly that
// state. Instances whose run ended cleanly are reset to the image and
// reused (tens of microseconds); the others are closed, and one fresh
// instance is made in the background in their place. Every run still gets
// an instance of its own, pristine, with its own random seed.

// booted is an instance with the prelude loaded and the bindings
// installed, not yet bound to a run.
type booted struct {
	in  *quickjs.Instance
	ctl controls
}

// gcHeadroom is how much a run may allocate before the engine's first
// garbage collection.
const gcHeadroom = 1 << 20

// maxPools bounds the distinct configurations (memory limit and bindings)
// that keep an image; the least recently used one is dropped.
const maxPools = 8

type poolKey struct {
	memory uint64
	spec   string
}

// A pool is one configuration's image. It is made in the background when
// the configuration runs a second time: a process that runs one program
// (the CLI) should not boot a second instance next to it.
type pool struct {
	key    poolKey
	used   uint64 // LRU clock value, under Sandbox.poolMu
	active bool   // the image was asked for; under Sandbox.poolMu

	capturing sync.Mutex // held while capture boots

	mu      sync.Mutex
	img     *quickjs.Image
	ctl     controls // the control values, valid in every instance of img
	stopped bool
	working sync.WaitGroup // background work between its check of stopped and its end
}

// acquire returns an instance for the configuration: from its image when
// there is one, else booted now; and the pool to tell once the instance is
// released (nil when there is none).
//
// An instance that must be able to suspend (image set) always comes from
// the image, made now if need be.
func (s *Sandbox) acquire(memory uint64, spec string, image bool) (*booted, *pool, error) {
	p := s.pool(poolKey{memory, spec})
	if image {
		if s.bootEveryRun {
			return nil, nil, errNoImages
		}
		if p == nil {
			return nil, nil, ErrClosed
		}
		if err := p.capture(s); err != nil {
			return nil, p, err
		}
	}
	if p != nil {
		p.mu.Lock()
		img, ctl := p.img, p.ctl
		p.mu.Unlock()
		if img != nil {
			in, err := img.NewInstance(context.Background(), nil)
			if err != nil {
				return nil, p, err
			}
			return &booted{in: in, ctl: ctl}, p, nil
		}
	}
	b, err := s.boot(memory, spec, false)
	return b, p, err
}

// pool finds or starts the pool for a key.
func (s *Sandbox) pool(k poolKey) *pool {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	if s.poolsClosed || s.bootEveryRun {
		return nil
	}
	s.poolClock++
	if p := s.pools[k]; p != nil {
		p.used = s.poolClock
		if !p.active {
			p.active = true
			p.background(func() { _ = p.capture(s) })
		}
		return p
	}
	if len(s.pools) >= maxPools {
		var oldest *pool
		for _, p := range s.pools {
			if oldest == nil || p.used < oldest.used {
				oldest = p
			}
		}
		delete(s.pools, oldest.key)
		oldest.stop()
	}
	p := &pool{key: k, used: s.poolClock}
	if s.pools == nil {
		s.pools = map[poolKey]*pool{}
	}
	s.pools[k] = p
	return p
}

// background runs f on a goroutine of its own unless the pool stopped;
// stop waits for it.
func (p *pool) background(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.working.Add(1)
	go func() {
		defer p.working.Done()
		f()
	}()
}

// capture makes the pool's image unless it has one. When booting fails,
// runs boot for themselves and report the error. The instance is booted
// frozen, so the image is the same in every process and suspended runs can
// resume against it anywhere.
func (p *pool) capture(s *Sandbox) error {
	p.capturing.Lock()
	defer p.capturing.Unlock()
	p.mu.Lock()
	done, stopped := p.img != nil, p.stopped
	p.mu.Unlock()
	if done {
		return nil
	}
	if stopped {
		return ErrClosed
	}
	b, err := s.boot(p.key.memory, p.key.spec, true)
	if err != nil {
		return err
	}
	img, err := b.in.Capture()
	b.in.Close()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		img.Close()
		return ErrClosed
	}
	p.img, p.ctl = img, b.ctl
	return nil
}

// image returns the pool's image and control values, or nil when it has
// none (yet, or any more).
func (p *pool) image() (*quickjs.Image, controls) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.img, p.ctl
}

// released is called once a run's instance is closed. When it could not be
// reused (its run grew the memory, or died), one instance is made ahead in
// its place.
func (p *pool) released() {
	p.mu.Lock()
	img := p.img
	p.mu.Unlock()
	if img != nil && img.Spares() == 0 {
		p.background(func() { _ = img.Prepare(context.Background()) })
	}
}

// stop releases the image and waits for background work.
func (p *pool) stop() {
	p.mu.Lock()
	p.stopped = true
	img := p.img
	p.img = nil
	p.mu.Unlock()
	p.working.Wait()
	if img != nil {
		img.Close()
	}
}

// stopPools is called by Close.
func (s *Sandbox) stopPools() {
	s.poolMu.Lock()
	pools := s.pools
	s.pools = nil
	s.poolMu.Unlock()
	for _, p := range pools {
		p.stop()
	}
}

// boot creates an instance, runs the prelude and installs the bindings.
func (s *Sandbox) boot(memory uint64, spec string, frozen bool) (b *booted, err error) {
	in, err := s.engine.NewInstance(context.Background(), quickjs.InstanceConfig{MemoryLimit: memory, StackSize: stackSize, Frozen: frozen})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			in.Close()
		}
	}()
	b = &booted{in: in}
	fn, err := in.EvalBytecode(s.prelude)
	if err != nil {
		return nil, err
	}
	defer in.Free(fn)
	hostFn, err := in.NewHostFunction("host")
	if err != nil {
		return nil, err
	}
	defer in.Free(hostFn)
	callFn, err := in.NewHostFunction("call")
	if err != nil {
		return nil, err
	}
	defer in.Free(callFn)
	ctl, err := in.Call(fn, in.Global(), hostFn, callFn)
	if err != nil {
		return nil, err
	}
	b.ctl.obj = ctl
	// In a fixed order: each box is an allocation, and an image must be
	// the same in every process.
	for _, c := range []struct {
		name string
		dst  *quickjs.Value
	}{
		{"install", &b.ctl.install}, {"settle", &b.ctl.settle}, {"fire", &b.ctl.fire},
		{"cancelTimers", &b.ctl.cancelTimers}, {"start", &b.ctl.start}, {"finish", &b.ctl.finish},
		{"describe", &b.ctl.describe}, {"callId", &b.ctl.callID}, {"site", &b.ctl.site},
		{"retree", &b.ctl.retree},
	} {
		if *c.dst, err = in.GetProp(ctl, c.name); err != nil {
			return nil, err
		}
	}
	if _, err = b.callString(b.ctl.install, spec); err != nil {
		return nil, err
	}
	if s.bootScript != "" {
		if err = evalScript(in, s.bootScript, "boot.js"); err != nil {
			return nil, err
		}
	}
	// An instance's first evaluation costs three to five times the next
	// (measured: 27–54 µs against 9 µs for a wrapped `return 1`), the
	// first use of the parser's memory. Pay it here, with a program that
	// leaves nothing behind.
	if err = evalScript(in, warmUp, "warm-up.js"); err != nil {
		return nil, err
	}
	if err = in.RunJobs(); err != nil {
		return nil, err
	}
	// Booting leaves the engine's heap just under its first collection
	// threshold, so the run's first allocations would start a full
	// collection of the prelude's objects (a millisecond, on the run's
	// path). Collect now, off that path, and give the run headroom.
	if err = in.CollectGarbage(gcHeadroom); err != nil {
		return nil, err
	}
	return b, nil
}

// evalScript compiles a script and evaluates it, dropping its value.
func evalScript(in *quickjs.Instance, script, file string) error {
	code, err := in.Compile(script, file, quickjs.EvalStrict, false)
	if err != nil {
		return err
	}
	v, err := in.EvalBytecode(code)
	if err != nil {
		return err
	}
	in.Free(v)
	return nil
}

// warmUp has the shape of a wrapped program.
const warmUp = "(async () => {\nconst x = { a: [1, \"s\"], b: `t${1}` }\nreturn x.a.length\n})()"

// ImageSum identifies the image that runs with memory bytes and these
// bindings start from, and that their states are taken against: a state
// resumes only where ImageSum is the same. It depends on the engine
// build, the prelude and how an instance boots, and only on the
// bindings' names and error classes. It makes the image when there is
// none yet (a few milliseconds).
func (s *Sandbox) ImageSum(memory uint64, bindings []Namespace) (string, error) {
	if s.bootEveryRun {
		return "", errNoImages
	}
	p := s.pool(poolKey{memory, bindingSpec(bindings)})
	if p == nil {
		return "", ErrClosed
	}
	if err := p.capture(s); err != nil {
		return "", err
	}
	img, _ := p.image()
	if img == nil {
		return "", ErrClosed
	}
	d := img.Digest()
	return hex.EncodeToString(d[:]), nil
}

// bindingSpec is what the guest needs of the bindings: their names and
// error classes. Members stay on the host (see run.children), so prepared
// instances do not depend on them.
func bindingSpec(bindings []Namespace) string {
	type nsSpec struct {
		Name       string      `json:"name"`
		ErrorClass *ErrorClass `json:"errorClass,omitempty"`
	}
	specs := make([]nsSpec, len(bindings))
	for i, ns := range bindings {
		specs[i] = nsSpec{Name: ns.Name, ErrorClass: ns.ErrorClass}
	}
	b, _ := json.Marshal(specs)
	return string(b)
}

// callString calls a control function with string arguments and returns
// its result as a string ("" for undefined).
func (b *booted) callString(fn quickjs.Value, args ...string) (string, error) {
	in := b.in
	boxes := make([]quickjs.Value, 0, len(args))
	defer func() {
		for _, v := range boxes {
			in.Free(v)
		}
	}()
	for _, a := range args {
		v, err := in.NewString(a)
		if err != nil {
			return "", err
		}
		boxes = append(boxes, v)
	}
	return b.callValues(fn, boxes...)
}

func (b *booted) callValues(fn quickjs.Value, args ...quickjs.Value) (string, error) {
	in := b.in
	v, err := in.Call(fn, b.ctl.obj, args...)
	if err != nil {
		return "", err
	}
	defer in.Free(v)
	if !in.IsString(v) {
		return "", nil
	}
	return in.String(v)
}
