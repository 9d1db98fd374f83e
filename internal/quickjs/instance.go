package quickjs

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// HostFunc serves guest calls of functions made with
// [Instance.NewHostFunction]. name is the function's registered name; args
// are borrowed: they must not be freed, and the slice is reused once the
// function returns. The returned value is handed to the
// guest (ownership passes); an error is thrown in the guest as a string.
// It runs on the goroutine that called into the guest and may call back
// into the instance.
type HostFunc func(in *Instance, name string, args []Value) (Value, error)

// InstanceConfig configures one instance.
type InstanceConfig struct {
	// MemoryLimit is the engine's allocation limit in bytes. Allocations past
	// it fail with an uncatchable out-of-memory error. The linear memory is
	// also capped a little above it (the hard page cap). Zero means 64 MiB.
	MemoryLimit uint64

	// StackSize is the engine's stack limit in bytes, so deep recursion
	// throws a catchable RangeError instead of trapping. Zero means 256 KiB.
	StackSize uint32

	// Host serves calls of host functions.
	Host HostFunc

	// Frozen makes the instance's clocks and random source fixed: the
	// realtime clock reads a constant, the monotonic clock zero, and the
	// random source is seeded with zeros. Two frozen instances that run
	// the same code end in the same state byte for byte, so an image
	// captured from one (see Instance.Capture) is the same in every
	// process, and a suspended instance can resume against it anywhere.
	// Use it only for instances made to be captured.
	Frozen bool
}

// Value is a guest pointer to a heap-allocated JSValue (a "box"). A box
// returned by an Instance method is owned by the caller, who frees it with
// [Instance.Free]. Zero is never a valid box.
type Value uint32

// Errors returned by Instance methods. A call that returns ErrDead (or an
// error wrapping it) leaves the instance unusable; every later call
// returns ErrDead too, never a panic.
var (
	ErrDead        = errors.New("quickjs: instance is gone")
	ErrInterrupted = errors.New("quickjs: interrupted")
	ErrOutOfMemory = errors.New("quickjs: out of memory")
)

// Exception is a value thrown by guest code and not caught. Value is the
// thrown value, owned by the receiver of the error.
type Exception struct{ Value Value }

func (e *Exception) Error() string { return "quickjs: uncaught exception" }

// TrapError reports that the guest trapped (or was killed); the instance is
// dead. It wraps ErrDead.
type TrapError struct{ Err error }

func (e *TrapError) Error() string   { return "quickjs: instance trapped: " + e.Err.Error() }
func (e *TrapError) Unwrap() []error { return []error{ErrDead, e.Err} }

type rejection struct {
	promise, reason Value
	handled         bool
}

// Instance is one QuickJS runtime and context in its own wasm instance
// and linear memory. It is not safe for concurrent use, except
// [Instance.Interrupt], which any goroutine may call.
type Instance struct {
	e    *Engine
	img  *Image         // the image it was made from, which may reuse it
	cfg  InstanceConfig // with defaults applied
	mod  api.Module
	ctx  context.Context
	mem  *reservedMemory
	host HostFunc

	// exports holds each export's functions. A wazero api.Function owns
	// one native stack and must not be called again before its call
	// returns, and a host function may call back into the guest through
	// the export that is running (a timer callback that makes the host load
	// URL runs qjs_call inside qjs_call): such a call gets a function of
	// its own, looked up then. stacks holds a parameter stack per depth of
	// nested calls.
	exports [numExports]exportFns
	stacks  [][]uint64
	depth   int
	dead    bool

	born       time.Time
	origin     int64 // the first monotonic reading, performance.now's origin
	originRead bool
	seedJitter int64
	rng        *rand.ChaCha8
	stderr     []byte
	rejections []rejection

	killed   atomic.Bool
	deadline atomic.Int64 // UnixNano; zero means none
	ticks    atomic.Int64
	released atomic.Bool
	cancel   context.CancelFunc

	global  Value
	scratch uint32 // see mem.go
	counted bool   // holds a place in Engine.live

	// Reused by hostCall: the last host function name seen, and argument
	// buffers by nesting depth (a host function may run guest code that
	// calls the host again).
	hostName  string
	hostArgs  [][]Value
	hostDepth int

	// prior is the snapshot the instance was resumed from, until its next
	// snapshot (see rangePages).
	prior *prior
	// wrote is the instance's last snapshot, until anything else runs in
	// it (warm.go).
	wrote *written
}

// addLive counts a new instance, which Close waits for; it fails once the
// engine is closed.
func (e *Engine) addLive() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.live.Add(1)
	return nil
}

// NewInstance creates a fresh instance. ctx bounds instantiation and, with
// Config.Stop set to StopContextDone, every later call: cancelling it
// kills the instance.
func (e *Engine) NewInstance(ctx context.Context, cfg InstanceConfig) (*Instance, error) {
	if err := e.addLive(); err != nil {
		return nil, err
	}
	in, err := e.newInstance(ctx, cfg)
	if err != nil {
		e.live.Done()
		return nil, err
	}
	in.counted = true
	return in, nil
}

func (e *Engine) newInstance(ctx context.Context, cfg InstanceConfig) (in *Instance, err error) {
	if cfg.MemoryLimit == 0 {
		cfg.MemoryLimit = 64 << 20
	}
	if cfg.StackSize == 0 {
		cfg.StackSize = 256 << 10
	}
	mem, err := newReservedMemory(reservation(e, cfg.MemoryLimit))
	if err != nil {
		return nil, fmt.Errorf("quickjs: reserve linear memory: %w", err)
	}
	var seed [32]byte
	if !cfg.Frozen {
		_, _ = crand.Read(seed[:])
	}
	ctx, cancel := context.WithCancel(ctx)
	in = &Instance{
		e:          e,
		cfg:        cfg,
		cancel:     cancel,
		mem:        mem,
		host:       cfg.Host,
		born:       time.Now(),
		rng:        rand.NewChaCha8(seed),
		seedJitter: int64(1 + uint64(seed[0])<<16 | uint64(seed[1])<<8 | uint64(seed[2])),
	}
	in.ctx = context.WithValue(ctx, instanceKey{}, in)
	allocCtx := experimental.WithMemoryAllocator(in.ctx,
		experimental.MemoryAllocatorFunc(func(_, _ uint64) experimental.LinearMemory { return mem }))
	mod, err := e.runtime.InstantiateModule(allocCtx, e.compiled,
		wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		cancel()
		mem.release()
		return nil, fmt.Errorf("quickjs: instantiate: %w", err)
	}
	in.mod = mod
	defer func() {
		if err != nil {
			in.Close()
			in = nil
		}
	}()
	if err = in.bindExports(); err != nil {
		return nil, err
	}
	if _, err = in.call(xInitialize); err != nil {
		return nil, err
	}
	rc, err := in.call(xInit)
	if err != nil {
		return nil, err
	}
	if int32(rc) != 0 {
		return nil, errors.New("quickjs: engine initialization failed")
	}
	in.seedJitter = 0 // the seed is taken; the clock is real from here on
	steps := []struct {
		f   export
		arg uint64
	}{
		{xSetMemoryLimit, cfg.MemoryLimit},
		{xSetMaxStackSize, uint64(cfg.StackSize)},
		{xSetRejectionHandler, 1},
	}
	for _, s := range steps {
		if _, err = in.call(s.f, s.arg); err != nil {
			return nil, err
		}
	}
	g, err := in.call(xGetGlobal)
	if err != nil {
		return nil, err
	}
	in.global = Value(g)
	if in.scratch, err = in.malloc(scratchSize); err != nil {
		return nil, err
	}
	return in, nil
}

// call invokes a guest export. Any wazero error (a trap, a kill, a closed
// module) leaves the instance dead.
func (in *Instance) call(id export, args ...uint64) (uint64, error) {
	if in.wrote != nil {
		in.forget()
	}
	if in.dead {
		if in.killed.Load() {
			return 0, ErrInterrupted
		}
		return 0, ErrDead
	}
	x := &in.exports[id]
	if x.active == len(x.fns) {
		f := in.mod.ExportedFunction(exportNames[id])
		if f == nil {
			in.dead = true // checkABI saw it at load: the module is gone
			return 0, ErrDead
		}
		x.fns = append(x.fns, f)
	}
	if in.depth == len(in.stacks) {
		in.stacks = append(in.stacks, make([]uint64, maxExportParams))
	}
	stack := in.stacks[in.depth]
	copy(stack, args)
	f := x.fns[x.active]
	x.active++
	in.depth++
	err := f.CallWithStack(in.ctx, stack)
	in.depth--
	x.active--
	if err != nil {
		in.dead = true
		if in.killed.Load() || in.pastDeadline() {
			in.killed.Store(true)
			return 0, ErrInterrupted
		}
		return 0, &TrapError{Err: err}
	}
	return stack[0], nil
}

// exportFns is one export's functions: fns[i] serves the call that is i
// deep in calls of the same export (see Instance.exports).
type exportFns struct {
	fns    []api.Function
	active int
}

// bindExports looks up every export once, while the instance is made:
// a lookup costs microseconds and an allocation, and most runs use most
// exports.
func (in *Instance) bindExports() error {
	for id, name := range exportNames {
		f := in.mod.ExportedFunction(name)
		if f == nil {
			return &MissingExportError{Name: name}
		}
		in.exports[id].fns = append(in.exports[id].fns, f)
	}
	return nil
}

// maxExportParams is the most parameters (or results) any export takes.
const maxExportParams = 8

// errKill unwinds guest code from inside a tick. wazero recovers it and
// returns it from the export call; the instance is dead from then on.
var errKill = errors.New("quickjs: killed")

// tick runs in the guest's goroutine every fuelPerTick loop iterations.
func (in *Instance) tick() {
	if in.ticks.Add(1)%yieldEvery == 0 {
		// Compiled guest code has no preemption points, so a guest that
		// loops keeps its thread but for these calls; yielding here lets
		// the runs and requests waiting for a thread have it in turn.
		runtime.Gosched()
	}
	in.stopIfDone()
}

// yieldEvery is how many ticks pass between yields of the thread. See
// RATIONALE.md, "Why do looping programs yield their thread?".
const yieldEvery = 8

// stopIfDone unwinds the guest (see errKill) once the instance was killed
// or its deadline passed. It runs on the guest's goroutine, inside a call
// from the guest.
func (in *Instance) stopIfDone() {
	if in.killed.Load() || in.pastDeadline() {
		in.killed.Store(true)
		panic(errKill)
	}
}

func (in *Instance) pastDeadline() bool {
	d := in.deadline.Load()
	return d != 0 && time.Now().UnixNano() >= d
}

// SetDeadline makes guest code stop with ErrInterrupted once t has passed:
// the instance checks its own clock at every tick, so the deadline holds
// even when no other goroutine gets to run. The zero time clears it.
func (in *Instance) SetDeadline(t time.Time) {
	if t.IsZero() {
		in.deadline.Store(0)
		return
	}
	in.deadline.Store(t.UnixNano())
}

// Kill stops the instance: running guest code stops at its next tick
// (within fuelPerTick loop iterations), and every later call returns
// ErrInterrupted. It is safe to call from any goroutine.
func (in *Instance) Kill() {
	in.killed.Store(true)
	if in.e.cfg.Stop == StopContextDone {
		in.cancel()
	}
}

// Killed reports whether Kill was called or the deadline stopped the guest.
func (in *Instance) Killed() bool { return in.killed.Load() }

// Ticks returns how many fuel ticks the instance has taken.
func (in *Instance) Ticks() int64 { return in.ticks.Load() }

// mustCall is call for exports that cannot fail on a live instance; a
// failure still only yields ErrDead-style zero values.
func (in *Instance) mustCall(f export, args ...uint64) uint32 {
	r, _ := in.call(f, args...)
	return uint32(r)
}

// SetHost replaces the function serving host-function calls, so an
// instance prepared ahead of time can serve the run that takes it.
func (in *Instance) SetHost(h HostFunc) { in.host = h }

// RestartClock makes the monotonic clock read as it did when the engine
// first read it, so performance.now() starts again from zero: a program
// learns nothing from it about when its instance was prepared (and so
// when earlier runs ended).
func (in *Instance) RestartClock() {
	in.born = time.Now().Add(-time.Duration(in.origin))
}

// AdvanceClock moves the monotonic clock forward by d, as if d had passed
// while the instance was held (a resumed snapshot whose time away counts).
func (in *Instance) AdvanceClock(d time.Duration) {
	if d > 0 {
		in.born = in.born.Add(-d)
	}
}

// Dead reports whether the instance can no longer run code.
func (in *Instance) Dead() bool { return in.dead }

// Global returns the global object. The box is owned by the instance; do
// not free it.
func (in *Instance) Global() Value { return in.global }

// Free releases a box.
func (in *Instance) Free(v Value) {
	if v != 0 && !in.dead {
		_, _ = in.call(xFreeValue, uint64(v))
	}
}

// check turns a result box into an error when it holds an exception.
func (in *Instance) check(v uint64, err error) (Value, error) {
	if err != nil {
		return 0, err
	}
	box := Value(v)
	if box == 0 {
		return 0, fmt.Errorf("%w: engine allocation failed", ErrOutOfMemory)
	}
	isExc, err := in.call(xIsException, uint64(box))
	if err != nil {
		return 0, err
	}
	if isExc == 0 {
		return box, nil
	}
	in.Free(box)
	return 0, in.takeException()
}

// takeException converts the pending exception into an error.
func (in *Instance) takeException() error {
	exc, err := in.call(xGetException)
	if err != nil {
		return err
	}
	unc, err := in.call(xIsUncatchable, exc)
	if err != nil {
		return err
	}
	if unc == 0 {
		return &Exception{Value: Value(exc)}
	}
	// Uncatchable: the engine's out-of-memory error.
	in.Free(Value(exc))
	return ErrOutOfMemory
}

// Eval evaluates a global script. flags are QuickJS JS_EVAL_* flags.
func (in *Instance) Eval(code, filename string, flags int) (Value, error) {
	cp, cl, err := in.allocString(code)
	if err != nil {
		return 0, err
	}
	defer in.freeGuest(cp)
	fp, _, err := in.writeString(filename)
	if err != nil {
		return 0, err
	}
	defer in.freeGuest(fp)
	return in.check(in.call(xEval, uint64(cp), uint64(cl), uint64(fp), uint64(flags)))
}

// Eval flags (quickjs.h).
const (
	EvalStrict = 1 << 3
	// EvalAsync allows await at a script's top level: evaluating it
	// gives a promise of an object whose value property is the script's
	// completion value.
	EvalAsync = 1 << 7
)

// Compile compiles a global script to engine bytecode without running it.
// Bytecode is specific to the engine binary; [Instance.EvalBytecode] runs
// it in any instance of the same Engine, skipping the parse. With
// stripSource the bytecode leaves out the source text, which only
// Function.prototype.toString shows.
func (in *Instance) Compile(code, filename string, flags int, stripSource bool) ([]byte, error) {
	cp, cl, err := in.allocString(code)
	if err != nil {
		return nil, err
	}
	defer in.freeGuest(cp)
	fp, _, err := in.writeString(filename)
	if err != nil {
		return nil, err
	}
	defer in.freeGuest(fp)
	lp, err := in.malloc(4)
	if err != nil {
		return nil, err
	}
	defer in.freeGuest(lp)
	var writeFlags uint64
	if stripSource {
		writeFlags = 1 << 4
	}
	bp, err := in.call(xCompile, uint64(cp), uint64(cl), uint64(fp), uint64(flags), writeFlags, uint64(lp))
	if err != nil {
		return nil, err
	}
	if bp == 0 {
		return nil, in.takeException()
	}
	defer in.freeGuest(uint32(bp))
	n, ok := in.mod.Memory().ReadUint32Le(lp)
	if !ok {
		return nil, ErrDead
	}
	b, ok := in.mod.Memory().Read(uint32(bp), n)
	if !ok {
		return nil, ErrDead
	}
	return append([]byte(nil), b...), nil
}

// EvalBytecode runs bytecode made by [Instance.Compile].
func (in *Instance) EvalBytecode(code []byte) (Value, error) {
	p, err := in.malloc(uint32(len(code)))
	if err != nil {
		return 0, err
	}
	defer in.freeGuest(p)
	if !in.mod.Memory().Write(p, code) {
		return 0, ErrDead
	}
	return in.check(in.call(xEvalBytecode, uint64(p), uint64(len(code))))
}

// Call calls fn with this and args (borrowed).
func (in *Instance) Call(fn, this Value, args ...Value) (Value, error) {
	var argv uint32
	if len(args) > 0 {
		p := in.scratch + scratchArgv
		if in.scratch == 0 || len(args) > maxScratchArgs {
			var err error
			if p, err = in.malloc(uint32(len(args) * 4)); err != nil {
				return 0, err
			}
			defer in.freeGuest(p)
		}
		for i, a := range args {
			in.mod.Memory().WriteUint32Le(p+uint32(i)*4, uint32(a))
		}
		argv = p
	}
	return in.check(in.call(xCall, uint64(fn), uint64(this), uint64(len(args)), uint64(argv)))
}

// GetProp reads obj[name].
func (in *Instance) GetProp(obj Value, name string) (Value, error) {
	p, _, err := in.writeString(name)
	if err != nil {
		return 0, err
	}
	defer in.freeGuest(p)
	return in.check(in.call(xGetPropString, uint64(obj), uint64(p)))
}

// SetProp assigns obj[name] = v (v stays owned by the caller).
func (in *Instance) SetProp(obj Value, name string, v Value) error {
	p, _, err := in.writeString(name)
	if err != nil {
		return err
	}
	defer in.freeGuest(p)
	rc, err := in.call(xSetPropString, uint64(obj), uint64(p), uint64(v))
	if err != nil {
		return err
	}
	if int32(rc) < 0 {
		return in.takeException()
	}
	return nil
}

// NewString makes a guest string from UTF-8 (or WTF-8) text.
func (in *Instance) NewString(s string) (Value, error) {
	p, l, err := in.writeString(s)
	if err != nil {
		return 0, err
	}
	defer in.freeGuest(p)
	return in.check(in.call(xNewString, uint64(p), uint64(l)))
}

// NewNumber makes a guest number.
func (in *Instance) NewNumber(f float64) (Value, error) {
	return in.check(in.call(xNewNumber, api.EncodeF64(f)))
}

// Undefined returns a new box holding undefined.
func (in *Instance) Undefined() (Value, error) {
	return in.check(in.call(xGetUndefined))
}

// NewHostFunction makes a guest function whose calls reach the instance's
// HostFunc with this name.
func (in *Instance) NewHostFunction(name string) (Value, error) {
	p, l, err := in.writeString(name)
	if err != nil {
		return 0, err
	}
	defer in.freeGuest(p)
	return in.check(in.call(xNewHostFunction, uint64(p), uint64(l), 0))
}

// IsString reports whether v holds a string.
func (in *Instance) IsString(v Value) bool {
	r, err := in.call(xIsString, uint64(v))
	return err == nil && r != 0
}

// Float64 converts v with ToNumber semantics for primitives.
func (in *Instance) Float64(v Value) float64 {
	r, err := in.call(xGetFloat64, uint64(v))
	if err != nil {
		return 0
	}
	return api.DecodeF64(r)
}

// String converts v to a Go string (ToString semantics; call only on
// strings or values whose conversion runs no guest code).
func (in *Instance) String(v Value) (string, error) {
	lp := in.scratch + scratchLen
	if in.scratch == 0 {
		var err error
		if lp, err = in.malloc(4); err != nil {
			return "", err
		}
		defer in.freeGuest(lp)
	}
	sp, err := in.call(xGetStringLen, uint64(v), uint64(lp))
	if err != nil {
		return "", err
	}
	if sp == 0 {
		return "", in.takeException()
	}
	defer func() { _, _ = in.call(xFreeCString, sp) }()
	n, ok := in.mod.Memory().ReadUint32Le(lp)
	if !ok {
		return "", ErrDead
	}
	b, ok := in.mod.Memory().Read(uint32(sp), n)
	if !ok {
		return "", ErrDead
	}
	return string(b), nil
}

// PromiseState returns 0 pending, 1 fulfilled, 2 rejected (-1 not a promise).
func (in *Instance) PromiseState(p Value) int {
	r, err := in.call(xPromiseState, uint64(p))
	if err != nil {
		return -1
	}
	return int(int32(r))
}

// PromiseResult returns a settled promise's value or reason.
func (in *Instance) PromiseResult(p Value) (Value, error) {
	return in.check(in.call(xPromiseResult, uint64(p)))
}

// RunJobs runs pending jobs (promise reactions) until none is left. A job
// that ends in an uncatchable error stops the drain with that error.
func (in *Instance) RunJobs() error {
	for {
		// 1: a job ran; 0: none was pending; negative: it threw.
		rc, err := in.call(xExecutePendingJob)
		if err != nil {
			return err
		}
		if rc == 0 {
			return nil
		}
		if int32(rc) < 0 {
			if err := in.takeException(); err != nil {
				var exc *Exception
				if errors.As(err, &exc) {
					in.Free(exc.Value)
					continue
				}
				return err
			}
		}
	}
}

// Identity returns the heap address of an object value, stable while it lives.
func (in *Instance) Identity(v Value) uint32 {
	return in.mustCall(xGetValuePtr, uint64(v))
}

// CollectGarbage runs a full collection and sets the next one to start
// after headroom more bytes are allocated.
func (in *Instance) CollectGarbage(headroom uint64) error {
	if _, err := in.call(xRunGC); err != nil {
		return err
	}
	_, err := in.call(xSetGCThreshold, in.AllocatedSize()+headroom)
	return err
}

// AllocatedSize returns the bytes counted against the memory limit.
func (in *Instance) AllocatedSize() uint64 {
	r, _ := in.call(xGetAllocatedSize)
	return uint64(uint32(r))
}

// TakeRejections returns and clears the rejection-tracker events since the
// last call. The caller owns the returned boxes.
func (in *Instance) TakeRejections() (promises, reasons []Value, handled []bool) {
	for _, r := range in.rejections {
		promises = append(promises, r.promise)
		reasons = append(reasons, r.reason)
		handled = append(handled, r.handled)
	}
	in.rejections = nil
	return promises, reasons, handled
}

// Close releases the instance. It is idempotent.
func (in *Instance) Close() {
	if in.released.Swap(true) {
		return
	}
	in.releasePrior()
	recycled := in.img != nil && in.img.recycle(in)
	in.dead = true
	in.cancel()
	if !recycled {
		in.closeModule()
	}
	if in.counted {
		in.e.live.Done()
	}
}

// Reuse gives a finished instance back to the image it was made from,
// reset to it, and closes this handle, reporting true. It reports false
// and changes nothing when the instance cannot be reused: it was not made
// from an image, died, was killed, is running or grew its memory, or the
// image keeps enough instances. Call Close then.
func (in *Instance) Reuse() bool {
	if in.img == nil || in.released.Load() || !in.img.recycle(in) {
		return false
	}
	in.releasePrior()
	in.released.Store(true)
	in.dead = true
	in.cancel()
	if in.counted {
		in.e.live.Done()
	}
	return true
}

// closeModule closes the wasm instance and unmaps its memory.
func (in *Instance) closeModule() {
	if in.mod != nil {
		_ = in.mod.Close(context.Background())
	}
	in.mem.release()
}
