package codemode

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/codemode-go/codemode/internal/guest"
	"github.com/codemode-go/codemode/internal/sandbox"
)

// Runtime runs programs against a fixed tool tree and limits. It is safe
// for concurrent use; runs never share state.
type Runtime struct {
	opts   Options
	tools  []*toolEntry
	index  map[string]*toolEntry // by pathKey
	byName map[string]*toolEntry // by dot-joined name (names may collide: the first wins)
	paths  [][]string            // binding members, "$codemode.search" last
	sb     guest.Runner          // may be a guest.Suspender
	cat    catalog
	idx    indexCache
	types  *typeRegistry
	tel    *telemetry // nil: no providers

	sumOnce sync.Once
	sum     string // treeSum

	imageOnce sync.Once
	imageSum  string // ImageSum
	imageErr  error

	// stateKeys are StateKey and then PreviousStateKeys: the keys a state
	// may be sealed with.
	stateKeys [][]byte
	// sealed are copies of the last states this Runtime sealed.
	sealed sealedStates

	// closing ends every run when Close is called.
	closing context.Context
	close   context.CancelFunc

	mu     sync.Mutex
	closed bool
	runs   sync.WaitGroup
}

// New checks the options and tool tree and prepares a Runtime. The engine
// itself is compiled once per process (and per CacheDir) and shared by
// every Runtime.
func New(opts Options) (*Runtime, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	entries, err := opts.Tools.flatten()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	tel, err := newTelemetry(&opts)
	if err != nil {
		return nil, fmt.Errorf("codemode: metrics: %w", err)
	}
	sb, err := sharedSandbox(opts.CacheDir, opts.EngineWasm)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{opts: opts, tools: entries, index: map[string]*toolEntry{}, sb: sb, tel: tel}
	if len(opts.StateKey) > 0 {
		rt.stateKeys = append([][]byte{opts.StateKey}, opts.PreviousStateKeys...)
	}
	rt.types = newTypeRegistry(entries)
	for _, e := range entries {
		if e.tool.ValidateOutput && e.tool.Types != nil {
			r, err := rt.resolveWithTypes(e.tool.Types, e.tool.Output)
			if err != nil {
				return nil, fmt.Errorf("%w: tool %s: output schema: %w", ErrInvalidOptions, jsPath(e.path), err)
			}
			e.output = r
		}
	}
	rt.closing, rt.close = context.WithCancel(context.Background())
	rt.byName = map[string]*toolEntry{}
	for _, e := range entries {
		rt.index[pathKey(e.path)] = e
		if rt.byName[e.name] == nil {
			rt.byName[e.name] = e
		}
		rt.paths = append(rt.paths, e.path)
	}
	for _, b := range builtinTools {
		if b.listed && b.offered(rt) {
			rt.paths = append(rt.paths, []string{BuiltinNamespace, b.name})
		}
	}
	return rt, nil
}

// Execute runs one program: the body of an async function, in JavaScript
// or TypeScript. Program failures are reported in the Result; the error
// is non-nil only when the run did not run (ErrClosed: the Runtime was
// closed before) or was interrupted: ctx ended (the error is ctx.Err())
// or Close stopped it (ErrStopped). An interrupted run's
// Result is partial: OK is false and Error is nil, since the program did
// not fail, and Logs and ToolCalls hold what happened until then. No hook
// runs after Execute returns.
func (rt *Runtime) Execute(ctx context.Context, code string) (Result, error) {
	if rt.isClosed() {
		return Result{ToolCalls: []ToolCall{}}, ErrClosed
	}
	return rt.executeLogged(ctx, code, nil)
}

// executeLogged is Execute; started, when not nil, is closed once the
// run is registered with the Runtime (or refused).
func (rt *Runtime) executeLogged(ctx context.Context, code string, started chan struct{}) (Result, error) {
	res, _, err := rt.live(ctx, code, started, func(runCtx context.Context) (*execution, sandbox.Result, stateHeader, *Result, error) {
		ex, sr, early, err := rt.start(runCtx, code, false)
		return ex, sr, stateHeader{}, early, err
	})
	return res, err
}

type logKey struct{}

// WithLogListener returns a context whose runs — Execute,
// ExecuteSuspendable and Resume — call f with each console line the run
// keeps, as it is written (a resumed run's new lines only). f runs on the
// run's goroutine and must not block.
func WithLogListener(ctx context.Context, f func(line string)) context.Context {
	return context.WithValue(ctx, logKey{}, f)
}

func logListener(ctx context.Context) func(string) {
	f, _ := ctx.Value(logKey{}).(func(string))
	return f
}

func (rt *Runtime) isClosed() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.closed
}

// Execute runs one program with a Runtime made from opts:
// Execute(ctx, opts, code) behaves exactly as New(opts) followed by
// Execute(ctx, code). Invalid options are returned as the error.
func Execute(ctx context.Context, opts Options, code string) (Result, error) {
	rt, err := New(opts)
	if err != nil {
		return Result{ToolCalls: []ToolCall{}}, err
	}
	defer rt.Close()
	return rt.Execute(ctx, code)
}

// Errors Execute returns for a closed Runtime.
var (
	// ErrClosed: the Runtime was closed (or shutting down) before the
	// run began; nothing of the program ran.
	ErrClosed = errors.New("codemode: runtime closed")
	// ErrStopped: Close stopped the run while it ran.
	ErrStopped = errors.New("codemode: run stopped: the runtime was closed")
)

// ErrEngineUnavailable is wrapped by the error New returns when the file
// $CODEMODE_ENGINE_WASM names cannot be read (see Options.EngineWasm).
// The message says to unset the variable, which leaves the engine built
// into every build.
var ErrEngineUnavailable = sandbox.ErrEngineUnavailable

// ErrEngineMismatch is wrapped by the error New returns when engine bytes
// (Options.EngineWasm, $CODEMODE_ENGINE_WASM, ...) are not the pinned
// build; the message names where they came from.
var ErrEngineMismatch = sandbox.ErrEngineMismatch

// Close stops the runs in flight (each Execute returns ErrStopped with its
// partial Result), waits for them to return, and refuses new ones. After
// Close returns, no program of the Runtime runs and none of its hooks is
// called. A tool still running then is one that ignores its context: it
// is not waited for, and its result is dropped.
func (rt *Runtime) Close() error {
	rt.mu.Lock()
	rt.closed = true
	rt.mu.Unlock()
	rt.close()
	rt.runs.Wait()
	return nil
}

// Shutdown refuses new runs and waits for the runs in flight to end by
// themselves; when ctx ends first, it stops them as Close does and
// returns ctx's error.
func (rt *Runtime) Shutdown(ctx context.Context) error {
	rt.mu.Lock()
	rt.closed = true
	rt.mu.Unlock()
	done := make(chan struct{})
	go func() {
		rt.runs.Wait()
		close(done)
	}()
	select {
	case <-done:
		rt.close()
		return nil
	case <-ctx.Done():
		_ = rt.Close()
		return ctx.Err()
	}
}

var shared struct {
	mu sync.Mutex
	m  map[string]*sandbox.Sandbox // by CacheDir
}

// sharedSandbox returns the process-wide engine for a configuration,
// compiling it on first use.
//
// Engines are keyed by CacheDir alone, not by where the bytes came from:
// every binary accepted has the pinned SHA-256, so an engine compiled from
// the host's bytes and one compiled from the cache are the same engine.
// The host's bytes are verified before a shared engine is reused, so
// wrong ones fail New even then.
func sharedSandbox(cacheDir string, wasm []byte) (*sandbox.Sandbox, error) {
	if len(wasm) > 0 {
		if err := enginebin.Verify(wasm, enginebin.Source{Kind: enginebin.Host}); err != nil {
			return nil, fmt.Errorf("codemode: engine: %w", err)
		}
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if sb := shared.m[cacheDir]; sb != nil {
		return sb, nil
	}
	sb, err := sandbox.New(context.Background(), sandbox.Options{CacheDir: cacheDir, EngineWasm: wasm})
	if err != nil {
		return nil, fmt.Errorf("codemode: engine: %w", err)
	}
	if shared.m == nil {
		shared.m = map[string]*sandbox.Sandbox{}
	}
	shared.m[cacheDir] = sb
	return sb, nil
}

// compileDiagnostic describes a program that does not compile.
func compileDiagnostic(err error) *Diagnostic {
	var ge *guest.Error
	if !errors.As(err, &ge) {
		return &Diagnostic{Kind: ParseError, Message: err.Error()}
	}
	d := &Diagnostic{Kind: ParseError, Message: ge.Message, Suggestions: ge.Suggestions}
	if ge.Unsupported {
		d.Kind = UnsupportedSyntax
	}
	if ge.Line > 0 {
		d.Location = &Location{Line: ge.Line, Column: ge.Column}
	}
	return d
}

// Descriptor says what a Runtime runs programs with and in, for hosts
// that show it, log it or choose between runtimes.
type Descriptor struct {
	// Language is what programs are written in.
	Language string `json:"language"`
	// Engine names the JavaScript engine and its build; EngineSHA256 is
	// the digest of the engine binary (a suspended state resumes only
	// on the same).
	Engine       string `json:"engine"`
	EngineSHA256 string `json:"engineSha256"`
	// Isolation says what keeps a program from the host.
	Isolation string `json:"isolation"`
}

// Descriptor describes the Runtime's language, engine and isolation.
func (rt *Runtime) Descriptor() Descriptor {
	return Descriptor{
		Language:     "JavaScript (ES2023), or TypeScript with its types stripped; the body of an async function",
		Engine:       "QuickJS-NG, from quickjs-wasi " + enginebin.PackageVersion + ", compiled to WebAssembly",
		EngineSHA256: enginebin.SHA256,
		Isolation:    "WebAssembly on wazero, every run in an engine instance of its own with its memory capped: no filesystem, network, process, clock beyond Date, modules or code generation; the host is reached only through the tools",
	}
}
