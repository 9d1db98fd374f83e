// Package typescript turns a program — the body of an async function,
// written in JavaScript or TypeScript — into a script the sandbox runs,
// and maps positions in that script back to the program's own lines.
package typescript

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"unicode/utf8"

	"github.com/evanw/esbuild/pkg/api"
)

// Program is a compiled program.
type Program struct {
	// Script is strict-mode JavaScript whose completion value is the
	// promise of the program's async function.
	Script string
	// Transformed reports that esbuild produced Script; otherwise Script
	// is the program itself, wrapped.
	Transformed bool
	sm          *sourceMap
	// script: the program was compiled as a script (CompileScript), not
	// wrapped in a function, so no header line precedes it.
	script bool
}

// Error is a program that does not compile.
type Error struct {
	// Unsupported marks syntax that is valid JavaScript but not allowed in
	// a program (import and export statements).
	Unsupported bool
	Message     string
	// Line and Column locate the error in the program (1-based; Column
	// counts characters). Zero when unknown.
	Line, Column int
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Message)
	}
	return e.Message
}

// emptyMessage explains a program with no code.
const emptyMessage = "the program is empty: write the body of an async function and return a value"

// The program becomes the body of an async arrow function. The header
// sits on its own line, so program line n is script line n+1.
const (
	header = "(async () => {\n"
	footer = "\n})()"
)

// Wrap wraps a program as it is, for the fast path: most programs are
// plain JavaScript, and running them directly skips esbuild (about 0.3 ms
// a call, whatever the input size). It returns nil when the program must
// go through Compile: when it is empty, or when its text has the shape of
// a TypeScript generic call (f<T>(x)), which is also valid JavaScript
// with a different meaning (two comparisons). Every other TypeScript
// construct is a syntax error to a JavaScript parser, so a program that
// fails to compile as wrapped goes through Compile as well.
func Wrap(code string) *Program {
	if strings.TrimSpace(code) == "" || genericCall.MatchString(code) {
		return nil
	}
	return &Program{Script: header + code + footer}
}

// genericCall matches an identifier, a closing bracket or a property
// access followed by type arguments and a call: f<T>(, a.b<T, U>(,
// x]<{ a: T }>(.
var genericCall = regexp.MustCompile(`[\w$)\]]\s*<` + typeArgs + `(<` + typeArgs + `>` + typeArgs + `)*>\s*\(`)

// typeArgs is text inside type arguments: no angle brackets, statement
// ends, assignments, parentheses, or the && and || of an expression.
const typeArgs = `(?:[^<>;=&|()]|&[^&]|\|[^|])*`

// transforms bounds the esbuild transforms under way in the process. A
// transform cannot be stopped, so one whose caller gave up at its deadline
// goes on until it ends; Check's limits keep that to a fraction of a
// second, and this keeps abandoned transforms from piling up.
var transforms = make(chan struct{}, runtime.GOMAXPROCS(0))

// Compile strips TypeScript syntax with esbuild and wraps the program. It
// checks the program first (see Check) and refuses one over
// MaxTranspileBytes; it returns ctx's error when ctx ends first.
func Compile(ctx context.Context, code string) (*Program, error) {
	return compile(ctx, code, false)
}

// CompileScript is Compile for a program that is a script rather than a
// function body (a REPL cell): its TypeScript syntax is stripped and
// nothing is wrapped around it, so top-level declarations stay top-level
// and line n of Script is line n of the program.
func CompileScript(ctx context.Context, code string) (*Program, error) {
	return compile(ctx, code, true)
}

func compile(ctx context.Context, code string, script bool) (*Program, error) {
	if strings.TrimSpace(code) == "" {
		return nil, &Error{Message: emptyMessage}
	}
	if err := Check(code); err != nil {
		return nil, err
	}
	if len(code) > MaxTranspileBytes {
		return nil, &Error{Message: fmt.Sprintf("the program is %d bytes; TypeScript is compiled only in programs up to %d bytes (128 KiB): write it as plain JavaScript or shorten it", len(code), MaxTranspileBytes)}
	}
	// A select picks among ready cases at random: a context already done
	// would otherwise lose to a free compiler slot half the time.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case transforms <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	type outcome struct {
		p   *Program
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{nil, fmt.Errorf("typescript: the compiler failed: %v", p)}
			}
			<-transforms
		}()
		p, err := transform(code, script)
		done <- outcome{p, err}
	}()
	select {
	case o := <-done:
		return o.p, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func transform(code string, script bool) (*Program, error) {
	input, offset := header+code+footer, 1
	if script {
		input, offset = code, 0
	}
	res := api.Transform(input, api.TransformOptions{
		Loader:         api.LoaderTS,
		Target:         api.ES2022,
		Sourcemap:      api.SourceMapExternal,
		SourcesContent: api.SourcesContentExclude,
		Sourcefile:     "program.ts",
		Charset:        api.CharsetUTF8,
		LegalComments:  api.LegalCommentsNone,
		LogLimit:       1,
		TsconfigRaw:    `{"compilerOptions":{"useDefineForClassFields":true,"verbatimModuleSyntax":false}}`,
	})
	if len(res.Errors) > 0 {
		return nil, toError(code, res.Errors[0], offset)
	}
	sm, err := parseSourceMap(res.Map)
	if err != nil {
		return nil, fmt.Errorf("typescript: source map: %w", err)
	}
	return &Program{Script: string(res.Code), Transformed: true, sm: sm, script: script}, nil
}

// toError describes esbuild's message; offset is the lines before the
// program in esbuild's input (the header's).
func toError(code string, m api.Message, offset int) *Error {
	e := &Error{Message: m.Text}
	loc := m.Location
	if loc == nil {
		return e
	}
	line := loc.Line - offset
	if line < 1 {
		return e
	}
	lines := strings.Split(code, "\n")
	if line > len(lines) {
		// Past the program's end: the footer (e.g. an unclosed block).
		last := lines[len(lines)-1]
		e.Line, e.Column = len(lines), utf8.RuneCountInString(last)+1
		return e
	}
	text := lines[line-1]
	col := loc.Column
	if col > len(text) {
		col = len(text)
	}
	e.Line, e.Column = line, utf8.RuneCountInString(text[:col])+1
	// An import or export statement inside the function body is a syntax
	// error to esbuild, reported at the keyword or just after it.
	for _, at := range []int{col, len(text) - len(strings.TrimLeft(text, " \t"))} {
		if isModuleStatement(text[at:]) {
			e.Unsupported = true
			e.Column = utf8.RuneCountInString(text[:at]) + 1
			e.Message = "import and export statements are not supported: a program cannot load modules; call the tools object instead"
			break
		}
	}
	return e
}

// isModuleStatement reports whether text starts an import or export
// statement (not a dynamic import() call or import.meta).
func isModuleStatement(text string) bool {
	for _, kw := range []string{"import", "export"} {
		if !strings.HasPrefix(text, kw) {
			continue
		}
		rest := strings.TrimLeft(text[len(kw):], " \t")
		if rest == "" {
			return true
		}
		switch rest[0] {
		case '(', '.':
			return kw == "export"
		}
		return true
	}
	return false
}

// Position maps a 1-based line and column of Script back to the program.
func (p *Program) Position(line, column int) (int, int, bool) {
	if p == nil {
		return 0, 0, false
	}
	if !p.Transformed {
		// Only the header line precedes the program.
		if line < 2 {
			return 0, 0, false
		}
		return line - 1, column, true
	}
	if p.sm == nil {
		return 0, 0, false
	}
	sl, sc, ok := p.sm.lookup(line-1, column-1)
	if p.script {
		sl++ // the map's lines count from 0, and no header precedes
	}
	if !ok || sl < 1 {
		return 0, 0, false
	}
	return sl, sc + 1, true
}

var errBadMap = errors.New("malformed mappings")
