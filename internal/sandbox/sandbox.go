package sandbox

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/codemode-go/codemode/internal/quickjs"
	"github.com/codemode-go/codemode/internal/secret"
)

//go:embed prelude.js
var prelude string

//go:embed url.js
var urlJS string

// FailureKind classifies why a run did not produce a value. The kinds are
// orthogonal: exactly one applies to a failed run.
type FailureKind string

// Failure kinds.
const (
	// Exception: the program threw (or its promise rejected), it can never
	// finish, or a call it never awaited failed.
	Exception FailureKind = "exception"
	// Timeout: the run exceeded Request.Timeout.
	Timeout FailureKind = "timeout"
	// Abort: the caller's context was cancelled.
	Abort FailureKind = "abort"
	// Memory: the program exceeded its memory limit.
	Memory FailureKind = "memory"
	// WorkerExit: the engine instance died (a trap) or could not start.
	WorkerExit FailureKind = "worker-exit"
	// InvalidOutput: the program's value is not plain data.
	InvalidOutput FailureKind = "invalid-output"
	// OutputLimit: the value's JSON exceeded Request.MaxOutputBytes;
	// Result.Value holds its first MaxOutputBytes bytes.
	OutputLimit FailureKind = "output-limit"
	// StateLimit: the run waited for held calls, but its state would
	// exceed Request.MaxStateBytes, so it did not suspend.
	StateLimit FailureKind = "state-limit"
)

// Options configure a [Sandbox]. The zero value is ready to use.
type Options struct {
	// CacheDir keeps compiled engine code on disk across processes. Empty
	// means compile in memory once per Sandbox (a few hundred milliseconds).
	// New refuses a directory other users could write, and loads only
	// compiled code that CacheKey signed (HMAC-SHA256); it removes the rest
	// and compiles afresh.
	CacheDir string

	// CacheKey signs and checks the compiled code in CacheDir. Nil means
	// the per-user key [CacheKey] returns; when there is none (no
	// configuration directory, or the key cannot be made there) CacheDir
	// is not used, since the cache only saves time.
	CacheKey []byte

	// EngineWasm is the QuickJS-NG engine binary to use instead of the
	// built-in one; it must be the pinned build. Nil means the file
	// $CODEMODE_ENGINE_WASM names when that is set, else the built-in copy.
	EngineWasm []byte

	// BootEveryRun makes every run boot its own instance instead of taking
	// one from its configuration's image: the design before images, kept
	// to measure them against.
	BootEveryRun bool

	// BootScript, when set, is evaluated in every instance as it boots,
	// after the prelude. It is for tests: it makes another image, as
	// another version of the prelude would.
	BootScript string
}

// ErrEngineUnavailable is wrapped by the error [New] returns when the
// file $CODEMODE_ENGINE_WASM names cannot be read. Its message says to
// unset the variable, which leaves the built-in engine.
var ErrEngineUnavailable = enginebin.ErrUnavailable

// ErrEngineMismatch is wrapped by the error [New] returns when engine
// bytes are not the pinned build; the message names their source.
var ErrEngineMismatch = enginebin.ErrMismatch

// Sandbox runs programs. It is safe for concurrent use; runs are
// independent of each other.
type Sandbox struct {
	bootEveryRun bool
	bootScript   string // Options.BootScript
	engine       *quickjs.Engine
	// prelude and url are prelude.js and url.js compiled once to engine
	// bytecode: parsing them costs milliseconds per instance, loading
	// bytecode a tenth of that.
	prelude, url []byte

	mu     sync.Mutex
	closed bool
	runs   sync.WaitGroup

	poolMu      sync.Mutex
	pools       map[poolKey]*pool
	poolClock   uint64
	poolsClosed bool
}

// New resolves the engine binary (see Options.EngineWasm) and compiles
// it. This is the slow step; share the Sandbox.
func New(ctx context.Context, opts Options) (*Sandbox, error) {
	wasm, _, err := enginebin.Resolve(ctx, opts.EngineWasm)
	if err != nil {
		return nil, err
	}
	cfg := quickjs.Config{Wasm: wasm, CacheDir: opts.CacheDir, CacheKey: opts.CacheKey}
	if cfg.CacheDir != "" && cfg.CacheKey == nil {
		switch key, _, err := CacheKey(); {
		case errors.Is(err, secret.ErrUnsafe):
			// A key others could know signs nothing: say so rather than
			// quietly run slower.
			return nil, fmt.Errorf("sandbox: compilation cache: %w", err)
		case err != nil:
			cfg.CacheDir = ""
		default:
			cfg.CacheKey = key
		}
	}
	e, err := quickjs.NewEngine(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{engine: e, bootEveryRun: opts.BootEveryRun, bootScript: opts.BootScript}
	if err := s.compileScripts(ctx); err != nil {
		_ = e.Close(ctx)
		return nil, err
	}
	return s, nil
}

// CacheKey returns the per-user key that signs compiled engine code when
// Options.CacheKey is nil, and the file holding it: cache.key in
// codemode's configuration directory ($CODEMODE_CONFIG_DIR, default
// os.UserConfigDir()/codemode), made on first use. Its error wraps
// secret.ErrUnsafe when the file exists but others could read or replace
// it.
func CacheKey() (key []byte, file string, err error) {
	root, err := secret.Root()
	if err != nil {
		return nil, "", err
	}
	file = filepath.Join(root, "cache.key")
	key, err = secret.Key(file, 32)
	return key, file, err
}

func (s *Sandbox) compileScripts(ctx context.Context) error {
	in, err := s.engine.NewInstance(ctx, quickjs.InstanceConfig{})
	if err != nil {
		return err
	}
	defer in.Close()
	if s.prelude, err = in.Compile(prelude, "<prelude>", quickjs.EvalStrict, true); err != nil {
		return fmt.Errorf("sandbox: prelude.js does not compile: %w", err)
	}
	if s.url, err = in.Compile(urlJS, "<url>", quickjs.EvalStrict, true); err != nil {
		return fmt.Errorf("sandbox: url.js does not compile: %w", err)
	}
	return nil
}

// Close waits for in-flight runs (including runs abandoned at their
// deadline whose engine is still unwinding), then releases the engine.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.poolMu.Lock()
	s.poolsClosed = true
	s.poolMu.Unlock()
	s.runs.Wait()
	s.stopPools()
	return s.engine.Close(context.Background())
}

// Language describes what programs are written in.
type Language struct {
	Name    string // "JavaScript"
	Edition string // language level, e.g. "ES2023+"
	Engine  string // the engine and version
}

// Language describes the language programs are run as.
func (s *Sandbox) Language() Language {
	return Language{Name: "JavaScript", Edition: "ES2023+", Engine: "QuickJS-NG " + s.engine.Version()}
}

// Isolation describes how runs are confined.
type Isolation struct {
	Mechanism   string // e.g. "wasm"
	Description string
}

// Isolation describes the confinement of runs.
func (s *Sandbox) Isolation() Isolation {
	return Isolation{Mechanism: "wasm", Description: "each run gets a fresh WebAssembly instance (wazero; " +
		"no filesystem, network or clock beyond its own) with its own linear memory, memory limit and page cap; " +
		"instrumented loops return to the host every 16,384 iterations, where deadlines and cancellation stop it"}
}

// Request is one run.
type Request struct {
	// Program is a JavaScript script run as strict code. Its completion
	// value is the run's value; when that value is a promise, the run
	// waits for it. Errors are located in this text.
	Program string

	// Bindings are the namespaces the program can call.
	Bindings []Namespace

	// Fallback, when set, is called when Program is empty or does not
	// compile, before any program code has run. It returns the program to
	// compile and run instead (say, the same text after a TypeScript
	// transform), or ok false to end the run as not compiling, with
	// Program's syntax error when it had one. It runs on the run's
	// goroutine; ctx ends when the run does (its deadline, the caller's
	// cancellation), and so must Fallback.
	Fallback func(ctx context.Context) (program string, ok bool)

	// Timeout bounds the run; zero means none (the caller's context still
	// applies).
	Timeout time.Duration

	// Deadline, when not zero, is when the run ends, in place of Timeout
	// after Run starts (for a caller that spent part of the budget before
	// calling Run); Timeout still names the limit in messages.
	Deadline time.Time

	// MemoryBytes is the engine memory limit; zero means DefaultMemoryBytes.
	MemoryBytes uint64

	// MaxOutputBytes caps the JSON text of the value; zero means no cap.
	MaxOutputBytes int

	// MaxLogBytes caps the console text kept; later lines are dropped and
	// Result.LogsDropped counts them. Zero means DefaultMaxLogBytes.
	MaxLogBytes int

	// OnLog, when set, is called with each console line the run keeps, as
	// it is written, on the run's goroutine: it must not block.
	OnLog func(Log)

	// Suspend lets Admit hold calls (by returning ErrHold): a held call's
	// work is not run; when the program has nothing left to do but wait
	// for held calls, the run stops and Result.Suspended records it, for
	// Resume to continue with the calls' results.
	Suspend bool

	// MaxStateBytes bounds a suspended run's State: a run whose state
	// would be larger fails with StateLimit instead, as soon as that is
	// known. Zero means no limit.
	MaxStateBytes int64

	// Script compiles Program (and Fallback's) as a global script that
	// may await at its top level: its top-level declarations are the
	// global scope's, so they outlive the run in a kept heap (Keep,
	// From), and its value is its completion value — the last
	// expression statement's — since a script has no return.
	Script bool

	// Keep keeps the heap when the run ends: Result.Kept is the
	// instance's state (of the same form as a suspended run's), for a
	// later run's From. A run that timed out, ran out of memory or was
	// cancelled keeps nothing; one whose program threw keeps what it
	// had done. MaxStateBytes bounds the kept state.
	Keep bool

	// From starts the run in a heap an earlier run kept (Result.Kept)
	// with the same memory limit and bindings, instead of a fresh one.
	// Errors as for Resume.
	From *State

	// StateRoom is how many bytes the caller will append to a suspended
	// run's State (its own header, a MAC). The state is made with that
	// much spare capacity, and as much again as the sandbox's own header
	// (the caller's usually describes the held calls again), so appending
	// copies nothing; beyond it, appending still works, by copying.
	StateRoom int
}

// Defaults for Request fields left zero.
const (
	DefaultMemoryBytes = 64 << 20
	DefaultMaxLogBytes = 1 << 20
)

// Namespace is a global object whose members are callable from the
// program and served by the host. Members form a tree: a member path
// ["orders", "lookup"] is called as name.orders.lookup(input). Every path
// below the root is callable (unknown ones reach Admit too), and enumerating
// a node lists its children in the order members are given.
type Namespace struct {
	// Name is the global binding: it must match [A-Za-z_][A-Za-z0-9_]* and
	// be neither a reserved word nor a global the sandbox owns.
	Name string

	// Members are the callable paths; segments are arbitrary strings.
	Members [][]string

	// Admit is called synchronously, in call order, for every call. It
	// returns the work to run, or a *CallError to reject the call at once.
	// Work runs on its own goroutine and never touches the engine.
	Admit func(Call) (Work, error)

	// ErrorClass, when set, makes rejected calls instances of a global
	// error class (see ErrorClass).
	ErrorClass *ErrorClass
}

// ErrorClass declares the error class rejected calls become: a global
// class extending Error, named Name, whose instances carry the
// CallError's Kind in a "kind" property and the called member path
// (dot-joined) in the property named Member.
type ErrorClass struct {
	Name   string `json:"name"`
	Member string `json:"member"`
	// DataKind is the kind given to calls refused in the program because
	// their input is not plain data (default "InvalidDataValue").
	DataKind string `json:"dataKind,omitempty"`
}

// Call describes one call of a binding member.
type Call struct {
	ID    int             // the call's number in the run, from 1
	Path  []string        // member path below the namespace
	Key   string          // Path's names joined with NUL: one string per path, for lookups
	Input json.RawMessage // the argument's JSON; {} when absent
}

// Work performs an admitted call. ctx is cancelled when the run ends,
// times out, or the call loses a Promise.race.
type Work func(ctx context.Context) (json.RawMessage, error)

// CallError rejects a call with a kind and a message the program sees.
type CallError struct {
	Kind    string
	Message string
}

func (e *CallError) Error() string { return e.Kind + ": " + e.Message }

// Result is the outcome of a run.
type Result struct {
	// Value is the JSON text of the program's value when Failure is nil;
	// with an OutputLimit failure, the first MaxOutputBytes bytes of it
	// (cut at a UTF-8 boundary).
	Value json.RawMessage
	// ValueBytes is the full length of the value's JSON text.
	ValueBytes int
	// Logs are the console lines in order.
	Logs []Log
	// LogsDropped counts lines dropped beyond MaxLogBytes.
	LogsDropped int
	// Failure is nil for a successful run.
	Failure *Failure
	// Kept is the heap the run kept (Request.Keep); nil when it kept
	// none. KeepFailure says why a run that would have kept it did not
	// (its state was over MaxStateBytes).
	Kept        *State
	KeepFailure *Failure
	// Suspended is set when the run suspended (see Request.Suspend); Value
	// and Failure are then unset.
	Suspended *Suspension
}

// Log is one console line.
type Log struct {
	Level string // log, info, warn, error, debug
	Text  string
}

// Failure describes why a run failed.
type Failure struct {
	Kind FailureKind
	// Message is the thrown error's message, or the sandbox's explanation.
	Message string
	// Name is the thrown error's name ("TypeError", or an ErrorClass name).
	Name string
	// Code is the "kind" of an ErrorClass instance (e.g. the CallError
	// kind of a rejected call); Member its member path.
	Code   string
	Member string
	// Line and Column locate the throw in Request.Program (1-based); zero
	// when unknown.
	Line, Column int
	// Stack is the engine's stack trace of a thrown error, in Program
	// coordinates.
	Stack string
	// Syntax marks a program that did not compile (no code of it ran).
	Syntax bool
	// Unawaited marks a failed call the program never awaited.
	Unawaited bool
	// Deadlock marks a program that waited on a promise nothing could settle.
	Deadlock bool
}

var (
	identRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	reserved = map[string]bool{}
)

func init() {
	for _, w := range []string{
		// ECMAScript reserved words, strict-mode and contextual words.
		"break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete", "do",
		"else", "enum", "export", "extends", "false", "finally", "for", "function", "if", "import", "in",
		"instanceof", "new", "null", "return", "super", "switch", "this", "throw", "true", "try", "typeof",
		"var", "void", "while", "with", "yield", "let", "static", "implements", "interface", "package",
		"private", "protected", "public", "await", "async", "arguments", "eval", "undefined", "NaN", "Infinity",
		// Globals the sandbox owns.
		"globalThis", "console", "setTimeout", "clearTimeout", "setInterval", "clearInterval",
		"Function", "Object", "Array", "Promise", "JSON", "Math", "Reflect", "Proxy", "Error", "Symbol",
		"String", "Number", "Boolean", "Date", "RegExp", "Map", "Set", "WeakMap", "WeakSet", "URL",
		"URLSearchParams", "queueMicrotask", "structuredClone",
	} {
		reserved[w] = true
	}
}

// errorMembers are what an error instance carries or inherits (its own
// properties, Error.prototype's and Object.prototype's): the member
// property of an ErrorClass must not shadow them.
var errorMembers = map[string]bool{
	"kind": true, "name": true, "message": true, "stack": true, "cause": true, "errors": true,
	"constructor": true, "toString": true, "valueOf": true, "toLocaleString": true, "hasOwnProperty": true,
	"isPrototypeOf": true, "propertyIsEnumerable": true, "prototype": true,
}

// usableMember reports whether name can be an ErrorClass's member
// property: a name of its own, not one an error carries, and none of the
// __x__ names engines give special meaning (__proto__, __defineGetter__).
func usableMember(name string) bool {
	return identRe.MatchString(name) && !errorMembers[name] && !(strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__"))
}

// ErrInvalidRequest reports a malformed Request (a bad namespace name, a
// duplicate, a nil Admit).
var ErrInvalidRequest = errors.New("sandbox: invalid request")

func validate(req *Request) error {
	seen := map[string]bool{}
	for _, ns := range req.Bindings {
		if !identRe.MatchString(ns.Name) || reserved[ns.Name] {
			return fmt.Errorf("%w: namespace name %q is not a usable global name", ErrInvalidRequest, ns.Name)
		}
		if ns.ErrorClass != nil {
			ec := ns.ErrorClass
			if !identRe.MatchString(ec.Name) || reserved[ec.Name] || ec.Name == ns.Name {
				return fmt.Errorf("%w: error class name %q is not a usable global name", ErrInvalidRequest, ec.Name)
			}
			if seen[ec.Name] {
				return fmt.Errorf("%w: global %q bound twice", ErrInvalidRequest, ec.Name)
			}
			seen[ec.Name] = true
			if !usableMember(ec.Member) {
				return fmt.Errorf("%w: error class member property %q would shadow what an error carries", ErrInvalidRequest, ec.Member)
			}
		}
		if seen[ns.Name] {
			return fmt.Errorf("%w: global %q bound twice", ErrInvalidRequest, ns.Name)
		}
		seen[ns.Name] = true
		if ns.Admit == nil {
			return fmt.Errorf("%w: namespace %q has no Admit", ErrInvalidRequest, ns.Name)
		}
		for _, m := range ns.Members {
			if len(m) == 0 {
				return fmt.Errorf("%w: namespace %q has an empty member path", ErrInvalidRequest, ns.Name)
			}
		}
	}
	return nil
}
