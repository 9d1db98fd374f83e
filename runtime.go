package codemode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/codemode-go/codemode/internal/sandbox"
	"github.com/codemode-go/codemode/internal/typescript"
)

// Runtime runs programs against a fixed tool tree and limits. It is safe
// for concurrent use; runs never share state.
type Runtime struct {
	opts  Options
	tools []*toolEntry
	index map[string]*toolEntry // by pathKey
	paths [][]string            // binding members, "$codemode.search" last
	sb    *sandbox.Sandbox
	cat   catalog
	idx   indexCache

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
	sb, err := sharedSandbox(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{opts: opts, tools: entries, index: map[string]*toolEntry{}, sb: sb}
	for _, e := range entries {
		rt.index[pathKey(e.path)] = e
		rt.paths = append(rt.paths, e.path)
	}
	rt.paths = append(rt.paths, []string{SearchNamespace, "search"})
	return rt, nil
}

// Execute runs one program: the body of an async function, in JavaScript
// or TypeScript. Program failures are reported in the Result; the error
// is non-nil only when ctx is cancelled (then the Result is the partial
// one: logs and tool calls so far) or the Runtime is closed.
func (rt *Runtime) Execute(ctx context.Context, code string) (Result, error) {
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return Result{ToolCalls: []ToolCall{}}, ErrClosed
	}
	rt.runs.Add(1)
	rt.mu.Unlock()
	defer rt.runs.Done()
	return rt.execute(ctx, code)
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

// ErrClosed is returned by Execute after Close.
var ErrClosed = errors.New("codemode: runtime closed")

// Close waits for in-flight runs to finish and refuses new ones.
func (rt *Runtime) Close() error {
	rt.mu.Lock()
	rt.closed = true
	rt.mu.Unlock()
	rt.runs.Wait()
	return nil
}

var shared struct {
	mu sync.Mutex
	m  map[string]*sandbox.Sandbox // by CacheDir
}

// sharedSandbox returns the process-wide engine for a configuration,
// compiling it on first use.
func sharedSandbox(cacheDir string) (*sandbox.Sandbox, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if sb := shared.m[cacheDir]; sb != nil {
		return sb, nil
	}
	sb, err := sandbox.New(context.Background(), sandbox.Options{CacheDir: cacheDir})
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
func compileDiagnostic(code string, err error) *Diagnostic {
	var te *typescript.Error
	if !errors.As(err, &te) {
		return &Diagnostic{Kind: ParseError, Message: err.Error()}
	}
	d := &Diagnostic{Kind: ParseError, Message: te.Message}
	if te.Unsupported {
		d.Kind = UnsupportedSyntax
		d.Suggestions = []string{"Remove the import/export statement: the only capabilities are the functions on the global `tools` object."}
	}
	if te.Line > 0 {
		d.Location = &Location{Line: te.Line, Column: te.Column}
	}
	if d.Kind == ParseError && strings.TrimSpace(code) == "" {
		d.Suggestions = []string{"Write the body of an async function and `return` the value you need."}
	}
	return d
}
