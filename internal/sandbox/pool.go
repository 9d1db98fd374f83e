package sandbox

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/codemode-go/codemode/internal/quickjs"
)

// Runs start on instances prepared ahead of demand. Creating an instance,
// loading the prelude and installing the bindings takes about half a
// millisecond; a run that finds one ready skips all of it. Every instance
// still serves exactly one run and is discarded after it, so each run
// starts pristine, with its own memory and random seed.

// booted is an instance with the prelude loaded and the bindings
// installed, not yet bound to a run.
type booted struct {
	in  *quickjs.Instance
	ctl controls
}

// gcHeadroom is how much a run may allocate before the engine's first
// garbage collection.
const gcHeadroom = 1 << 20

// poolDepth is how many prepared instances a pool keeps ready.
const poolDepth = 2

// maxPools bounds the distinct configurations (memory limit and bindings)
// that keep prepared instances; the least recently used pool is dropped.
const maxPools = 8

type poolKey struct {
	memory uint64
	spec   string
}

// A pool is refilled by the goroutine that releases a finished run's
// instance, which starts anyway: taking a prepared instance wakes nobody,
// and a run pays for no thread wakeup of its own beyond that one.
type pool struct {
	key       poolKey
	ready     chan *booted // never full when a refill sends
	used      uint64       // LRU clock value, under Sandbox.poolMu
	active    bool         // refills happen; under Sandbox.poolMu
	refilling atomic.Bool

	mu      sync.Mutex
	stopped bool
	booting sync.WaitGroup // refills between their check of stopped and their send
}

// acquire returns a prepared instance for the configuration, or boots one
// now when none is ready, and the pool to refill after the run (nil when
// there is none).
func (s *Sandbox) acquire(memory uint64, spec string) (*booted, *pool, error) {
	p := s.pool(poolKey{memory, spec})
	if p != nil {
		select {
		case b := <-p.ready:
			return b, p, nil
		default:
		}
	}
	b, err := s.boot(memory, spec)
	return b, p, err
}

// pool finds or starts the pool for a key.
func (s *Sandbox) pool(k poolKey) *pool {
	s.poolMu.Lock()
	defer s.poolMu.Unlock()
	if s.poolsClosed {
		return nil
	}
	s.poolClock++
	if p := s.pools[k]; p != nil {
		p.used = s.poolClock
		// Refills start with the second run of a configuration: a
		// process that runs one program (the CLI) should not boot spare
		// instances next to it.
		if !p.active {
			p.active = true
			go p.refill(s)
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
	p := &pool{key: k, ready: make(chan *booted, poolDepth), used: s.poolClock}
	if s.pools == nil {
		s.pools = map[poolKey]*pool{}
	}
	s.pools[k] = p
	return p
}

// refill boots instances until the pool is full or stopped. One refill
// runs at a time; the others return at once, and the one running checks
// again after it lets go, so a run taken meanwhile is not left unfilled.
func (p *pool) refill(s *Sandbox) {
	for len(p.ready) < cap(p.ready) {
		if !p.refilling.CompareAndSwap(false, true) {
			return
		}
		ok := p.fill(s)
		p.refilling.Store(false)
		if !ok {
			return
		}
	}
}

// fill boots until the pool is full; false when stopped or booting fails
// (runs then boot for themselves and report the error).
func (p *pool) fill(s *Sandbox) bool {
	for len(p.ready) < cap(p.ready) {
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return false
		}
		p.booting.Add(1)
		p.mu.Unlock()
		b, err := s.boot(p.key.memory, p.key.spec)
		if err == nil {
			select {
			case p.ready <- b:
			default:
				b.in.Close()
			}
		}
		p.booting.Done()
		if err != nil {
			return false
		}
	}
	return true
}

// released is called once a run's instance is closed.
func (p *pool) released(s *Sandbox) {
	s.poolMu.Lock()
	active := p.active
	s.poolMu.Unlock()
	if active {
		p.refill(s)
	}
}

// stop ends refills and releases the ready instances. Callers hold
// Sandbox.poolMu or own p exclusively.
func (p *pool) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.booting.Wait()
	for {
		select {
		case b := <-p.ready:
			b.in.Close()
		default:
			return
		}
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
func (s *Sandbox) boot(memory uint64, spec string) (b *booted, err error) {
	in, err := s.engine.NewInstance(context.Background(), quickjs.InstanceConfig{MemoryLimit: memory, StackSize: stackSize})
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
	for name, dst := range map[string]*quickjs.Value{
		"install": &b.ctl.install, "settle": &b.ctl.settle, "fire": &b.ctl.fire,
		"cancelTimers": &b.ctl.cancelTimers, "start": &b.ctl.start, "finish": &b.ctl.finish,
		"describe": &b.ctl.describe, "callId": &b.ctl.callID,
	} {
		if *dst, err = in.GetProp(ctl, name); err != nil {
			return nil, err
		}
	}
	if _, err = b.callString(b.ctl.install, spec); err != nil {
		return nil, err
	}
	// An instance's first evaluation costs three to five times the next
	// (measured: 27–54 µs against 9 µs for a wrapped `return 1`), the
	// first use of the parser's memory. Pay it here, with a program that
	// leaves nothing behind.
	code, err := in.Compile(warmUp, "warm-up.js", quickjs.EvalStrict, false)
	if err != nil {
		return nil, err
	}
	v, err := in.EvalBytecode(code)
	if err != nil {
		return nil, err
	}
	in.Free(v)
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

// warmUp has the shape of a wrapped program.
const warmUp = "(async () => {\nconst x = { a: [1, \"s\"], b: `t${1}` }\nreturn x.a.length\n})()"

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
