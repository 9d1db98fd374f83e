package quickjs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// ErrWasmMismatch means Config.Wasm is not the pinned engine build.
var ErrWasmMismatch = errors.New("quickjs: Config.Wasm is not the pinned engine build (enginebin.SHA256)")

// Config configures an [Engine].
type Config struct {
	// Wasm is the engine binary, as internal/enginebin resolves it. This
	// package never looks for it: where the bytes come from is delivery,
	// kept apart from running them. NewEngine refuses any bytes but the
	// pinned build, so the ABI is the one abi.go declares.
	Wasm []byte

	// CacheDir, when non-empty, keeps compiled machine code in that
	// directory so later processes skip the ~200 ms compilation. Empty means
	// an in-memory cache for this process only. NewEngine refuses a
	// directory other users could write (see ErrUnsafeCache) and loads
	// only entries CacheKey signed; it removes the others and compiles
	// afresh.
	CacheDir string

	// CacheKey signs the entries NewEngine writes to CacheDir and checks
	// those it finds there (HMAC-SHA256). It must be at least 32 bytes
	// when CacheDir is set, and secret: whoever knows it can sign code
	// the engine will run.
	CacheKey []byte

	// Stop selects how [Instance.Kill] and deadlines reach running guest
	// code. The zero value, StopFuel, is the default and the only mode the
	// sandbox uses; the others exist to measure it against (see
	// RATIONALE.md, "Why instrument loops?").
	Stop StopMode

	// MaxMemoryBytes is the largest linear memory any instance may reserve:
	// the page cap behind every per-instance limit. Zero means 4 GiB.
	MaxMemoryBytes uint64
}

// StopMode is a mechanism for stopping guest code.
type StopMode int

const (
	// StopFuel instruments every loop of the engine to call into Go every
	// fuelPerTick iterations; the call kills an instance that is past its
	// deadline or was killed.
	StopFuel StopMode = iota
	// StopContextDone uses wazero's close-on-context-done checks at every
	// loop header: the context given to NewInstance ends the instance.
	StopContextDone
	// StopNone runs the engine unmodified: Kill and deadlines take effect
	// only when guest code next calls the host. For measurement only.
	StopNone
)

// Engine is a compiled QuickJS-NG module ready to instantiate. Compiling is
// the slow step (hundreds of milliseconds without a warm cache); do it once
// per process and share the Engine. An Engine is safe for concurrent use.
type Engine struct {
	cfg      Config
	runtime  wazero.Runtime
	cache    wazero.CompilationCache
	cacheSub string // wazero's directory in cfg.CacheDir, or ""
	compiled wazero.CompiledModule
	version  string

	// randomState is the offset of Math.random's state in every
	// instance's memory (0: unknown, and images are unavailable).
	randomState uint32
	// globals names the exports of every mutable global (see instrument).
	globals []string

	mu     sync.Mutex
	closed bool
	live   sync.WaitGroup
	images []*Image // captured, not yet closed
}

// NewEngine verifies and compiles cfg.Wasm.
func NewEngine(ctx context.Context, cfg Config) (*Engine, error) {
	if sum := sha256.Sum256(cfg.Wasm); hex.EncodeToString(sum[:]) != enginebin.SHA256 {
		return nil, ErrWasmMismatch
	}
	if cfg.MaxMemoryBytes == 0 {
		cfg.MaxMemoryBytes = 4 << 30
	}
	pages := cfg.MaxMemoryBytes / 65536
	if pages > 65536 {
		pages = 65536
	}
	var cache wazero.CompilationCache
	var sub string
	if cfg.CacheDir != "" {
		if len(cfg.CacheKey) < 32 {
			return nil, errors.New("quickjs: Config.CacheDir needs a CacheKey of at least 32 bytes")
		}
		var err error
		if sub, err = cacheSubdir(cfg.CacheDir); err != nil {
			return nil, err
		}
		// Making the cache reads no entry yet: wazero looks one up when
		// CompileModule runs, after purgeCache.
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("quickjs: compilation cache: %w", err)
		}
		if err := purgeCache(cfg.CacheDir, sub, cfg.CacheKey); err != nil {
			_ = cache.Close(ctx)
			return nil, err
		}
	} else {
		cache = wazero.NewCompilationCache()
	}
	rcfg := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(uint32(pages)).
		WithCloseOnContextDone(cfg.Stop == StopContextDone)
	rt := wazero.NewRuntimeWithConfig(ctx, rcfg)
	e := &Engine{cfg: cfg, runtime: rt, cache: cache, cacheSub: sub}
	if err := e.init(ctx); err != nil {
		_ = rt.Close(ctx)
		_ = cache.Close(ctx)
		return nil, err
	}
	return e, nil
}

func (e *Engine) init(ctx context.Context) error {
	bin := e.cfg.Wasm
	if e.cfg.Stop == StopFuel {
		var err error
		if bin, e.globals, err = instrument(e.cfg.Wasm); err != nil {
			return fmt.Errorf("quickjs: instrument: %w", err)
		}
	}
	compiled, err := e.runtime.CompileModule(ctx, bin)
	if err != nil {
		return fmt.Errorf("quickjs: compile: %w", err)
	}
	if e.cacheSub != "" {
		if err := signCache(e.cacheSub, e.cfg.CacheKey); err != nil {
			return err
		}
	}
	if err := checkABI(compiled); err != nil {
		return err
	}
	e.compiled = compiled
	if err := instantiateHostModules(ctx, e.runtime); err != nil {
		return err
	}
	in, err := e.newInstance(ctx, InstanceConfig{MemoryLimit: 8 << 20, Frozen: true})
	if err != nil {
		return err
	}
	defer in.Close()
	e.randomState = findRandomState(in)
	e.version, err = in.readCString(in.mustCall(xVersion))
	return err
}

// seedSentinel is the realtime clock, in microseconds, that frozen
// instances read, findRandomState's among them: a value no other word of
// a fresh engine's memory holds.
const seedSentinel = 0x0011_5eed_c0de_5eed

// findRandomState returns where Math.random's state lives in an engine's
// linear memory, or 0 when it cannot tell. As QuickJS creates a context it
// seeds the state from the realtime clock in microseconds and steps it
// once (xorshift64*) to derive the seed of its hash tables, stored in the
// next word. The instance passed in read seedSentinel then, so the state
// is the one aligned word holding the stepped sentinel, followed by that
// hash seed. Every instance of the engine has the same layout, so an
// instance made from an image gets a Math.random of its own by a write
// there (the hash seed stays: hash tables built at boot depend on it).
func findRandomState(in *Instance) uint32 {
	size := in.mod.Memory().Size()
	buf, ok := in.mod.Memory().Read(0, size)
	if !ok {
		return 0
	}
	x := uint64(seedSentinel)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	hash := uint32(x * 0x2545f4914f6cdd1d)
	var at uint32
	for off := uint32(0); off+12 <= size; off += 8 {
		if binary.LittleEndian.Uint64(buf[off:]) == x && binary.LittleEndian.Uint32(buf[off+8:]) == hash {
			if at != 0 {
				return 0 // twice: not a unique mark
			}
			at = off
		}
	}
	return at
}

// Version returns the engine's own QuickJS-NG version string.
func (e *Engine) Version() string { return e.version }

// Stop reports the engine's stop mechanism.
func (e *Engine) Stop() StopMode { return e.cfg.Stop }

// Close waits for every live instance to close, then releases the runtime.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.live.Wait()
	e.mu.Lock()
	images := e.images
	e.images = nil
	e.mu.Unlock()
	for _, img := range images {
		img.Close()
	}
	err := e.runtime.Close(ctx)
	if cerr := e.cache.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// ErrClosed is returned by [Engine.NewInstance] after [Engine.Close].
var ErrClosed = errors.New("quickjs: engine closed")

func instantiateHostModules(ctx context.Context, rt wazero.Runtime) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	env := rt.NewHostModuleBuilder("env")
	fn := func(b wazero.HostModuleBuilder, name string, f api.GoModuleFunc, params, results []api.ValueType) {
		b.NewFunctionBuilder().WithGoModuleFunction(f, params, results).Export(name)
	}
	fn(env, "host_call", hostCall, []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32})
	fn(env, "host_interrupt", hostInterrupt, nil, []api.ValueType{i32})
	fn(env, "host_promise_rejection", hostPromiseRejection, []api.ValueType{i32, i32, i32}, nil)
	// Modules are not available to programs: both hooks fail, and the
	// engine turns that into a catchable "could not load module" error.
	fn(env, "host_module_normalize", returnZero, []api.ValueType{i32, i32}, []api.ValueType{i32})
	fn(env, "host_module_load", returnZero, []api.ValueType{i32, i32}, []api.ValueType{i32})
	// Every instance runs in UTC; the same import carries the loop-fuel tick.
	fn(env, "host_get_timezone_offset", hostTimezoneOffset, []api.ValueType{i32, i32}, []api.ValueType{i32})
	if _, err := env.Instantiate(ctx); err != nil {
		return fmt.Errorf("quickjs: host module env: %w", err)
	}
	wasi := rt.NewHostModuleBuilder("wasi_snapshot_preview1")
	fn(wasi, "clock_time_get", wasiClockTimeGet, []api.ValueType{i32, i64, i32}, []api.ValueType{i32})
	fn(wasi, "fd_close", wasiBadFD1, []api.ValueType{i32}, []api.ValueType{i32})
	fn(wasi, "fd_fdstat_get", wasiBadFD2, []api.ValueType{i32, i32}, []api.ValueType{i32})
	fn(wasi, "fd_seek", wasiBadFD4, []api.ValueType{i32, i64, i32, i32}, []api.ValueType{i32})
	fn(wasi, "fd_write", wasiFdWrite, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	fn(wasi, "random_get", wasiRandomGet, []api.ValueType{i32, i32}, []api.ValueType{i32})
	if _, err := wasi.Instantiate(ctx); err != nil {
		return fmt.Errorf("quickjs: host module wasi: %w", err)
	}
	return nil
}
