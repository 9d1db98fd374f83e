package sandbox

import (
	"context"
	"encoding/json"

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

type pool struct {
	key     poolKey
	ready   chan *booted
	quit    chan struct{}
	done    chan struct{}
	used    uint64 // LRU clock value, under Sandbox.poolMu
	filling bool   // the filler runs; under Sandbox.poolMu
}

// acquire returns a prepared instance for the configuration, or boots one
// now when none is ready.
func (s *Sandbox) acquire(memory uint64, spec string) (*booted, error) {
	p := s.pool(poolKey{memory, spec})
	if p != nil {
		select {
		case b := <-p.ready:
			return b, nil
		default:
		}
	}
	return s.boot(memory, spec)
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
		// The filler starts with the second run of a configuration: a
		// process that runs one program (the CLI) should not boot spare
		// instances next to it.
		if !p.filling {
			p.filling = true
			go p.fill(s)
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
	p := &pool{key: k, ready: make(chan *booted, poolDepth), quit: make(chan struct{}), done: make(chan struct{}), used: s.poolClock}
	if s.pools == nil {
		s.pools = map[poolKey]*pool{}
	}
	s.pools[k] = p
	return p
}

// fill keeps the pool full until stopped.
func (p *pool) fill(s *Sandbox) {
	defer close(p.done)
	for {
		b, err := s.boot(p.key.memory, p.key.spec)
		if err != nil {
			return // runs boot for themselves and report the error
		}
		select {
		case p.ready <- b:
		case <-p.quit:
			b.in.Close()
			return
		}
	}
}

// stop ends the filler and releases the ready instances. Callers hold
// Sandbox.poolMu or own p exclusively.
func (p *pool) stop() {
	close(p.quit)
	if p.filling {
		<-p.done
	}
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
	ctl, err := in.Call(fn, in.Global(), hostFn)
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
	// Booting leaves the engine's heap just under its first collection
	// threshold, so the run's first allocations would start a full
	// collection of the prelude's objects (a millisecond, on the run's
	// path). Collect now, off that path, and give the run headroom.
	if err = in.CollectGarbage(gcHeadroom); err != nil {
		return nil, err
	}
	return b, nil
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
