package enginebin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"sync"
)

// Environment variables that steer resolution.
const (
	// EnvWasm names a file holding the engine binary, used ahead of the
	// cache and npm: the way to supply the engine without Go or npm at hand.
	EnvWasm = "CODEMODE_ENGINE_WASM"
	// EnvCacheDir replaces codemode's per-user cache directory
	// (os.UserCacheDir()/codemode), for tests and for hosts whose home
	// directory is not writable.
	EnvCacheDir = "CODEMODE_CACHE_DIR"
)

// Kind is a place engine bytes come from. The resolution sources are
// declared in the order [Resolve] tries them.
type Kind int

const (
	// Host is bytes the host supplied (codemode.Options.EngineWasm).
	Host Kind = iota + 1
	// Embedded is the copy built into a binary made with the
	// codemode_embed tag.
	Embedded
	// Env is the file $CODEMODE_ENGINE_WASM names.
	Env
	// Cache is the per-user cache file, [CachePath].
	Cache
	// Npm is `npm pack quickjs-wasi@PackageVersion`, whose result is
	// written to the cache.
	Npm
	// File is not a resolution source: it is a file given by hand to
	// `codemode engine install`.
	File
)

var kindNames = [...]string{Host: "host", Embedded: "embedded", Env: "env", Cache: "cache", Npm: "npm", File: "file"}

// String returns the kind's short name: host, embedded, env, cache, npm
// or file.
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Source says where engine bytes came from.
type Source struct {
	Kind Kind
	// Path is the file the bytes were read from (Env, Cache, File) or,
	// for Npm, the cache file they were written to (empty when the cache
	// could not be written).
	Path string
}

// String describes the source for messages.
func (s Source) String() string {
	switch s.Kind {
	case Host:
		return "Options.EngineWasm"
	case Embedded:
		return "the copy built in with -tags codemode_embed"
	case Env:
		return "$" + EnvWasm + " (" + s.Path + ")"
	case Cache:
		return "the cache file " + s.Path
	case Npm:
		return "npm quickjs-wasi@" + PackageVersion
	case File:
		return s.Path
	}
	return s.Kind.String()
}

// ErrUnavailable is wrapped by the error [Resolve] returns when no source
// has the engine, and when $CODEMODE_ENGINE_WASM names a file that cannot
// be read.
var ErrUnavailable = errors.New("no usable QuickJS-NG engine binary")

// ErrMismatch is matched (errors.Is) by every [MismatchError].
var ErrMismatch = errors.New("engine binary is not the pinned build")

// MismatchError reports bytes from Source whose hash is not the pinned one.
type MismatchError struct {
	Source Source
	Hash   string // "SHA-256", or "npm integrity" for a tarball
	Got    string
	Want   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s is not the pinned engine build: %s %s, want %s", e.Source, e.Hash, e.Got, e.Want)
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
// Resolve's order. An empty field skips its source.
type Finder struct {
	// Embedded is the copy built into the binary.
	Embedded []byte
	// EnvPath is the value of $CODEMODE_ENGINE_WASM.
	EnvPath string
	// CacheRoot is codemode's cache directory (see [CacheRoot]).
	CacheRoot string
	// Npm is the npm executable.
	Npm string

	// noCache explains an empty CacheRoot in the error.
	noCache error
}

// DefaultFinder is the Finder for this process: the copy built in (only
// with the codemode_embed tag), $CODEMODE_ENGINE_WASM, the per-user cache,
// and npm when it is on PATH.
func DefaultFinder() Finder {
	f := Finder{Embedded: embedded, EnvPath: os.Getenv(EnvWasm)}
	f.CacheRoot, f.noCache = CacheRoot()
	if p, err := exec.LookPath("npm"); err == nil {
		f.Npm = p
	}
	return f
}

// Find returns the engine from the first source that has it.
//
// A source someone chose — the copy a tagged build embedded, the file
// $CODEMODE_ENGINE_WASM names — is final: when its bytes are wrong or
// unreadable Find fails rather than quietly using another engine. The
// cache and npm are found, not chosen: a cache file with the wrong hash is
// refused and replaced by what npm fetches.
func (f Finder) Find(ctx context.Context) ([]byte, Source, error) {
	if len(f.Embedded) > 0 {
		src := Source{Kind: Embedded}
		if err := Verify(f.Embedded, src); err != nil {
			return nil, src, err
		}
		return f.Embedded, src, nil
	}
	if f.EnvPath != "" {
		src := Source{Kind: Env, Path: f.EnvPath}
		b, err := readWasm(f.EnvPath)
		if err != nil {
			return nil, src, fmt.Errorf("%w: $%s: %w", ErrUnavailable, EnvWasm, err)
		}
		if err := Verify(b, src); err != nil {
			return nil, src, err
		}
		return b, src, nil
	}
	reasons := []error{fmt.Errorf("$%s is not set", EnvWasm)}
	if f.CacheRoot == "" {
		reasons = append(reasons, fmt.Errorf("no per-user cache directory (%v; set $%s)", f.noCache, EnvCacheDir))
	} else {
		src := Source{Kind: Cache, Path: CachePath(f.CacheRoot)}
		b, err := readWasm(src.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			reasons = append(reasons, fmt.Errorf("not in the cache (%s)", src.Path))
		case err != nil:
			reasons = append(reasons, fmt.Errorf("cache: %w", err))
		default:
			if err := Verify(b, src); err != nil {
				reasons = append(reasons, err)
				break
			}
			return b, src, nil
		}
	}
	if f.Npm == "" {
		reasons = append(reasons, errors.New("npm is not on PATH"))
		return nil, Source{}, &unavailableError{reasons}
	}
	b, err := FetchNpm(ctx, f.Npm)
	if err != nil {
		reasons = append(reasons, err)
		return nil, Source{}, &unavailableError{reasons}
	}
	src := Source{Kind: Npm}
	if f.CacheRoot != "" {
		// A cache that cannot be written costs the next process another
		// fetch; it does not cost this one its engine.
		if p, err := Install(f.CacheRoot, b, src); err == nil {
			src.Path = p
		}
	}
	return b, src, nil
}

// unavailableError lists why each source failed and ends with the command
// that fixes it.
type unavailableError struct{ reasons []error }

func (e *unavailableError) Error() string {
	var b strings.Builder
	b.WriteString(ErrUnavailable.Error())
	b.WriteString(" (")
	for i, r := range e.reasons {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.Error())
	}
	b.WriteString("); install it with: ")
	b.WriteString(InstallCommand())
	return b.String()
}

func (e *unavailableError) Unwrap() []error { return append([]error{ErrUnavailable}, e.reasons...) }

// modulePath is this module's path, for InstallCommand.
const modulePath = "github.com/codemode-go/codemode"

// InstallCommand is the command that puts the engine in the cache. It
// names this module's own version when the binary knows it, because
// @latest may pin a different engine; a replaced or development build
// falls back to @latest.
func InstallCommand() string {
	version := "latest"
	if bi, ok := debug.ReadBuildInfo(); ok {
		m := &bi.Main
		if m.Path != modulePath {
			m = nil
			for _, d := range bi.Deps {
				if d.Path == modulePath {
					m = d
				}
			}
		}
		if m != nil && m.Replace == nil && strings.HasPrefix(m.Version, "v") {
			version = m.Version
		}
	}
	return "go run " + modulePath + "/cmd/codemode@" + version + " engine install"
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
//  2. the copy built in with the codemode_embed tag;
//  3. the file $CODEMODE_ENGINE_WASM names;
//  4. the per-user cache, [CachePath] of [CacheRoot];
//  5. npm pack quickjs-wasi@PackageVersion, when npm is on PATH, written to
//     the cache for the next process.
//
// Every source is checked against [SHA256]; see [Finder.Find] for which
// failures fall through to the next source. Sources 2–5 are searched once
// per process: the first success is kept, a failure is not, so a later
// call finds an engine installed since. Concurrent callers wait for one
// search rather than each running npm.
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
