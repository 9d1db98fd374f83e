package js

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/codemode-go/codemode/internal/guest"
	"github.com/codemode-go/codemode/internal/tsgen"
	"github.com/codemode-go/codemode/internal/typescript"
)

// Language is the JavaScript front end. The zero value is ready to use.
type Language struct{}

var _ guest.Language = Language{}

// Check refuses programs over typescript.MaxProgramBytes or nested past
// the scan's limits (see typescript.Check).
func (Language) Check(code string) error {
	if e := typescript.Check(code); e != nil {
		return convert(code, e)
	}
	return nil // not a nil *typescript.Error: that would be a non-nil error
}

// Wrap returns the program as written, as the body of an async function.
// Most programs are plain JavaScript, and running them as written skips
// esbuild. It returns nil for an empty program and for one shaped like a
// TypeScript generic call (f<T>(x)), which JavaScript would read as two
// comparisons (see typescript.Wrap).
func (Language) Wrap(code string) *guest.Program {
	return program(typescript.Wrap(code))
}

// Transform strips TypeScript with esbuild. A program the engine could
// not compile as written and that is over typescript.MaxTranspileBytes is
// declined: the engine's syntax error says more about it than "too large
// for TypeScript" would.
func (Language) Transform(ctx context.Context, code string, asWritten bool) (*guest.Program, error) {
	if asWritten && len(code) > typescript.MaxTranspileBytes {
		return nil, &guest.Declined{Suggestion: fmt.Sprintf("TypeScript syntax is accepted only in programs up to %d bytes; write larger programs as plain JavaScript.", typescript.MaxTranspileBytes)}
	}
	p, err := typescript.Compile(ctx, code)
	if err != nil {
		var te *typescript.Error
		if errors.As(err, &te) {
			return nil, convert(code, te)
		}
		return nil, err
	}
	return program(p), nil
}

// TransformScript strips TypeScript from a REPL cell, which stays a
// script (typescript.CompileScript).
func (Language) TransformScript(ctx context.Context, code string) (*guest.Program, error) {
	p, err := typescript.CompileScript(ctx, code)
	if err != nil {
		var te *typescript.Error
		if errors.As(err, &te) {
			return nil, convert(code, te)
		}
		return nil, err
	}
	return program(p), nil
}

// Signature renders the tool as a TypeScript declaration with JSDoc.
func (Language) Signature(t guest.Tool) guest.Rendered {
	return rendered(tsgen.Render(t.Path, t.Description, t.Tags, t.Input, t.Output, tsgen.Options{Named: t.Named, Parts: t.Parts, MaxSize: t.MaxSize}))
}

// Declare renders a named type as a TypeScript type alias with JSDoc.
func (Language) Declare(t guest.Type) guest.Rendered {
	return rendered(tsgen.Declare(t.Name, t.Description, t.Schema, tsgen.Options{Named: t.Named, Parts: t.Name}))
}

func rendered(r tsgen.Rendered) guest.Rendered {
	out := guest.Rendered{Text: r.Text, Uses: r.Uses}
	for _, p := range r.Parts {
		out.Parts = append(out.Parts, guest.Part{Name: p.Name, Text: p.Text, Uses: p.Uses})
	}
	return out
}

// TypeName makes a TypeScript type name (see tsgen.TypeName).
func (Language) TypeName(name string) string { return tsgen.TypeName(name) }

// CallSite renders the member expression from the tools object.
func (Language) CallSite(path []string) string { return tsgen.AccessPath(path) }

// Guide returns the JavaScript phrasing of the instructions.
func (Language) Guide() guest.Guide {
	g := guide
	g.Language = slices.Clone(g.Language)
	return g
}

func program(p *typescript.Program) *guest.Program {
	if p == nil {
		return nil
	}
	return &guest.Program{Script: p.Script, Transformed: p.Transformed, Locate: p.Position}
}

// convert gives a front-end error the suggestion a model needs to fix it.
func convert(code string, e *typescript.Error) *guest.Error {
	g := &guest.Error{Unsupported: e.Unsupported, Message: e.Message, Line: e.Line, Column: e.Column}
	switch {
	case e.Unsupported:
		g.Suggestions = []string{"Remove the import/export statement: the only capabilities are the functions on the global `tools` object."}
	case strings.TrimSpace(code) == "":
		g.Suggestions = []string{"Write the body of an async function and `return` the value you need."}
	}
	return g
}
