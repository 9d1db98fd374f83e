package guest

import (
	"context"
	"encoding/json"
	"fmt"
)

// Language is a guest language's front end: what the root package needs
// to turn a program as written into a script its runner compiles, to
// describe a program that does not compile, and to show tools and the
// language to a model. Implementations are safe for concurrent use.
//
// A program is prepared in two steps, so that the common case costs
// nothing: the runner first compiles [Language.Wrap]'s program, and only
// when that fails (or Wrap returned nil) calls [Language.Transform]. The
// runner compiles before it runs anything, so the fallback never runs a
// program twice.
type Language interface {
	// Check refuses, before any parser sees it, a program no parser may
	// be given: too large, or nested deeper than a parser's stack
	// allows. It returns nil or an *Error; a program with other syntax
	// errors passes, for the parsers to describe.
	Check(code string) error

	// Wrap returns the program as written, made ready for the runner, or
	// nil when it must go through Transform first.
	Wrap(code string) *Program

	// Transform is the fallback for a program the runner could not
	// compile from Wrap's program, or that Wrap returned nil for (a
	// TypeScript program, say, whose types it strips). asWritten reports
	// that the runner tried the program as written. It returns the
	// program to run instead, or an error: an *Error when the program
	// does not compile (its message replaces the runner's), a *Declined
	// when it did not try, or ctx's error when ctx ended first. It must
	// return once ctx ends.
	Transform(ctx context.Context, code string, asWritten bool) (*Program, error)

	// TransformScript is Transform for a program that runs as a script
	// (a REPL cell) rather than as a function body: nothing is wrapped
	// around it, so its top-level declarations stay top-level.
	TransformScript(ctx context.Context, code string) (*Program, error)

	// Signature renders the declaration of a tool a model reads, within
	// its size bound.
	Signature(t Tool) Rendered

	// Declare renders the declaration of a named type a signature refers
	// to, within the same bound.
	Declare(t Type) Rendered

	// TypeName makes the name of a declared type of a source's name for
	// it (issue-event → IssueEvent). Its names never hold "_", which
	// joins the names of parts.
	TypeName(name string) string

	// CallSite renders the expression a program calls a tool by, from
	// the binding namespace: tools.orders.lookup, tools.ns["odd-name"].
	CallSite(path []string) string

	// Guide is how the instructions describe the language and phrase
	// their examples.
	Guide() Guide
}

// Program is a program ready for the runner.
type Program struct {
	// Script is what the runner compiles.
	Script string
	// Transformed reports that Transform made Script; otherwise it is the
	// program as written, wrapped. A suspended run records it, so that a
	// resumed run can locate its failures again.
	Transformed bool
	// Locate maps a 1-based line and column of Script to the program as
	// written; ok is false for a position outside it. Nil when positions
	// cannot be mapped.
	Locate func(line, column int) (progLine, progColumn int, ok bool)
}

// Position maps a 1-based line and column of the Script the runner
// reported back to the program as written. A nil Program (one that never
// compiled) knows no positions.
func (p *Program) Position(line, column int) (int, int, bool) {
	if p == nil || p.Locate == nil {
		return 0, 0, false
	}
	return p.Locate(line, column)
}

// Error is a program the front end refuses, located in the program as
// written.
type Error struct {
	// Unsupported marks syntax the language has but a program may not use
	// (a module import, say); otherwise the program does not parse.
	Unsupported bool
	Message     string
	// Line and Column locate the error in the program (1-based; Column
	// counts characters). Zero when unknown.
	Line, Column int
	// Suggestions say how to fix it, in the language's terms.
	Suggestions []string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Message)
	}
	return e.Message
}

// Declined is Transform's error when it did not try: the runner could not
// compile the program as written, and the program is larger than the
// transform takes. The runner's own syntax error is then the one to
// report, with Suggestion added.
type Declined struct {
	Suggestion string
}

func (d *Declined) Error() string { return "not transformed: " + d.Suggestion }

// Tool is what a tool's signature is rendered from.
type Tool struct {
	// Path is the tool's path below the binding namespace; segments may
	// be any string.
	Path        []string
	Description string
	// Tags are the annotation tags the declaration carries (@readonly,
	// @destructive, ...), in order.
	Tags []string
	// Input and Output are JSON Schemas; nil when absent.
	Input, Output json.RawMessage
	// Named maps a $ref to the name of a declared type, which the
	// signature refers to by name; nil expands every reference.
	Named func(ref string) (name string, ok bool)
	// Parts prefixes the names of the parts a signature too large for its
	// bound is cut into.
	Parts string
	// MaxSize bounds the signature's size in bytes: zero means the
	// language's default, a negative value no bound.
	MaxSize int
}

// Type is what a named type's declaration is rendered from.
type Type struct {
	// Name is the type's name in declarations.
	Name        string
	Description string
	Schema      json.RawMessage
	// Named maps a $ref to the name of another declared type.
	Named func(ref string) (name string, ok bool)
}

// Rendered is a declaration with the names it refers to.
type Rendered struct {
	Text string
	// Uses are the named types and parts Text refers to, sorted.
	Uses []string
	// Parts are the declarations cut out of Text to bound its size.
	Parts []Part
}

// Part is a declaration cut out of a larger one.
type Part struct {
	Name string
	Text string
	Uses []string
}

// Guide is the language's part of the instructions. The root package
// decides what the instructions say, in which order and under which
// conditions (a rule about transactions only when a tool can be undone);
// the language writes the sentences whose wording is its own: examples of
// calls, what a program is, what its environment lacks. Each field is
// one or more complete sentences in Markdown, without a list marker.
type Guide struct {
	// Program says what a program is and how it returns its result.
	Program string
	// Cell says the same of a REPL session's cell (a script whose
	// declarations live on, ending with its value).
	Cell string
	// Confinement says what a program can reach and what comes back from
	// it.
	Confinement string
	// Environment says what the language's usual environments offer that
	// a program lacks.
	Environment string

	// Search shows a search for tools, for a catalog shown in part.
	Search string
	// Call shows how a tool is called, odd names included.
	Call string

	// Parallel shows independent calls made at once.
	Parallel string
	// Unknown says how to read a result whose type is not known.
	Unknown string
	// List says how a program lists namespaces and their tools.
	List string
	// SearchAPI describes the search tool's input and output, and paging.
	SearchAPI string
	// Types says how to read the declaration of a type a signature
	// names.
	Types string
	// Transaction shows a transaction: begin, calls, commit, rollback.
	Transaction string
	// Store shows keeping values across runs (the root adds the size
	// limit).
	Store string
	// Failure says how a failed call reaches the program.
	Failure string
	// Annotations says what the annotation tags in signatures mean.
	Annotations string

	// Language is the bullet points of the instructions' section on the
	// language: what is available, what is not, and how data crosses.
	Language []string
	// Fence is the info string of the code blocks that hold signatures
	// ("ts").
	Fence string
}
