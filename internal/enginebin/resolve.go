package enginebin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// EnvWasm names a file holding the engine binary, used instead of the
// built-in copy. The file must be the pinned build: the variable chooses
// where the bytes are read from, never which engine runs.
const EnvWasm = "CODEMODE_ENGINE_WASM"

// Kind is a place engine bytes come from. The sources are declared in the
// order [Resolve] tries them.
type Kind int

const (
	// Host is bytes the host supplied (codemode.Options.EngineWasm).
	Host Kind = iota + 1
	// Env is the file $CODEMODE_ENGINE_WASM names.
	Env
	// Embedded is the copy built into every binary (quickjs.wasm beside
	// this package's source).
	Embedded
)

var kindNames = [...]string{Host: "host", Env: "env", Embedded: "embedded"}

// String returns the kind's short name: host, env or embedded.
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Source says where engine bytes came from.
type Source struct {
	Kind Kind
	// Path is the file the bytes were read from (Env).
	Path string
}

// String describes the source for messages.
func (s Source) String() string {
	switch s.Kind {
	case Host:
		return "Options.EngineWasm"
	case Env:
		return "$" + EnvWasm + " (" + s.Path + ")"
	case Embedded:
		return "the engine built into codemode"
	}
	return s.Kind.String()
}

// fix is the one next step after bytes from s proved unusable.
func (s Source) fix() string {
	switch s.Kind {
	case Host:
		return "leave Options.EngineWasm nil to use the engine built into codemode"
	case Env:
		return "unset " + EnvWasm + " to use the engine built into codemode"
	case Embedded:
		return "build again from an unmodified copy of " + modulePath
	}
	return ""
}

// modulePath is this module's path, for messages.
const modulePath = "github.com/codemode-go/codemode"

// ErrUnavailable is wrapped by the error [Resolve] returns when the file
// $CODEMODE_ENGINE_WASM names cannot be read.
var ErrUnavailable = errors.New("no usable QuickJS-NG engine binary")

// ErrMismatch is matched (errors.Is) by every [MismatchError].
var ErrMismatch = errors.New("engine binary is not the pinned build")

// MismatchError reports bytes from Source whose hash is not the pinned one.
type MismatchError struct {
	Source Source
	Hash   string // "SHA-256"
	Got    string
	Want   string
}

// Error names the source and the hashes, and ends with what to do.
func (e *MismatchError) Error() string {
	msg := fmt.Sprintf("%s is not the pinned engine build: %s %s, want %s", e.Source, e.Hash, e.Got, e.Want)
	if fix := e.Source.fix(); fix != "" {
		msg += "; " + fix
	}
	return msg
}

// Is makes errors.Is(err, ErrMismatch) hold.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// Verify returns nil when b is the pinned engine build and a
// *MismatchError naming src otherwise.
func Verify(b []byte, src Source) error {
	if got := Sum(b); got != SHA256 {
		return &MismatchError{Source: src, Hash: "SHA-256", Got: got, Want: SHA256}
	}
	return nil
}

// Sum returns the hex SHA-256 of b, the form SHA256 is written in.
func Sum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// maxWasmBytes bounds what is read from a file that claims to be the
// engine (about 0.6 MiB): a wrong path must not read gigabytes before the
// hash check refuses it.
const maxWasmBytes = 64 << 20

func readWasm(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxWasmBytes+1))
}

// Finder looks for the engine in the sources after the host's bytes, in
// Resolve's order.
type Finder struct {
	// EnvPath is the value of $CODEMODE_ENGINE_WASM; empty skips it.
	EnvPath string
	// Embedded is the copy built into the binary.
	Embedded []byte
}

// DefaultFinder is the Finder for this process: $CODEMODE_ENGINE_WASM,
// then the copy built in.
func DefaultFinder() Finder {
	return Finder{EnvPath: os.Getenv(EnvWasm), Embedded: embedded}
}

// Find returns the engine from the first source that has it.
//
// A file someone named in $CODEMODE_ENGINE_WASM is final: when its bytes
// are wrong or unreadable Find fails rather than quietly using the
// built-in engine, and the error says to unset the variable.
func (f Finder) Find(context.Context) ([]byte, Source, error) {
	if f.EnvPath != "" {
		src := Source{Kind: Env, Path: f.EnvPath}
		b, err := readWasm(f.EnvPath)
		if err != nil {
			return nil, src, fmt.Errorf("%w: $%s: %w; %s", ErrUnavailable, EnvWasm, err, src.fix())
		}
		if err := Verify(b, src); err != nil {
			return nil, src, err
		}
		return b, src, nil
	}
	src := Source{Kind: Embedded}
	if err := Verify(f.Embedded, src); err != nil {
		return nil, src, err
	}
	return f.Embedded, src, nil
}

// process keeps the engine the first successful resolution found.
var process struct {
	mu  sync.Mutex
	b   []byte
	src Source
}

// Resolve returns the engine binary and where it came from, trying in
// order:
//
//  1. host, when non-empty (codemode.Options.EngineWasm);
//  2. the file $CODEMODE_ENGINE_WASM names, when it is set;
//  3. the copy built into every binary.
//
// Every source is checked against [SHA256], and a source that is present
// but wrong is an error, not a reason to try the next. Sources 2 and 3
// are read once per process: the first success is kept, a failure is not.
// Nothing is fetched and nothing outside the process is run.
func Resolve(ctx context.Context, host []byte) ([]byte, Source, error) {
	if len(host) > 0 {
		src := Source{Kind: Host}
		if err := Verify(host, src); err != nil {
			return nil, src, err
		}
		return host, src, nil
	}
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.b != nil {
		return process.b, process.src, nil
	}
	b, src, err := DefaultFinder().Find(ctx)
	if err != nil {
		return nil, src, err
	}
	process.b, process.src = b, src
	return b, src, nil
}
