package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Tool is one host capability a program can call as
// tools.<namespace>.<name>(input).
type Tool struct {
	// Description tells the model what the tool does.
	Description string

	// Input is the JSON Schema of the tool's one argument. Nil accepts any
	// input. Calls are validated against it before Run, unless
	// SkipInputValidation is set.
	Input *jsonschema.Schema

	// Output describes the result for signatures and documentation. It is
	// not enforced: real services drift from their declared schemas.
	Output *jsonschema.Schema

	// Run performs a call. input is the argument's JSON (an empty object
	// when the program passed none). The result is marshalled to JSON (a
	// json.RawMessage is used as is) and must be plain data. ctx ends with
	// the run's deadline, the caller's cancellation, or a lost
	// Promise.race.
	//
	// An error made with [ToolError] reaches the program with its message;
	// any other error, and a panic, reaches it only as "Tool execution
	// failed", so internal details never leak to the model.
	Run func(ctx context.Context, input json.RawMessage) (any, error)

	// SkipInputValidation leaves input checking to Run, for tools whose
	// upstream validates (an MCP server, an HTTP API).
	SkipInputValidation bool
}

// NewTool makes a Tool from a typed function, inferring the input and
// output schemas from In and Out (see jsonschema.For). The input is
// decoded into In after validation.
func NewTool[In, Out any](description string, fn func(ctx context.Context, in In) (Out, error)) (Tool, error) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		return Tool{}, fmt.Errorf("codemode: input schema: %w", err)
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		return Tool{}, fmt.Errorf("codemode: output schema: %w", err)
	}
	return Tool{
		Description: description,
		Input:       in,
		Output:      out,
		Run: func(ctx context.Context, raw json.RawMessage) (any, error) {
			var v In
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, ToolError("the input does not fit the tool's type: " + err.Error())
			}
			return fn(ctx, v)
		},
	}, nil
}

// ToolError returns an error whose message is safe to show the program
// and the model. Use it for expected failures the model can act on
// ("order o-9 not found"); everything else stays private.
func ToolError(message string) error { return &safeError{message} }

// ToolErrorf is [ToolError] with formatting.
func ToolErrorf(format string, args ...any) error {
	return &safeError{fmt.Sprintf(format, args...)}
}

type safeError struct{ msg string }

func (e *safeError) Error() string { return e.msg }

// safeMessage returns the message a tool error may show, and whether it is
// a ToolError.
func safeMessage(err error) (string, bool) {
	var s *safeError
	if errors.As(err, &s) {
		return s.msg, true
	}
	return "", false
}

// Tools is a tree of tools: each key names a [Tool] (or *Tool) or a nested
// Tools namespace. Keys are arbitrary strings; "$codemode" is reserved at
// the top level for the built-in search. A program calls a tool by its
// path: tools.orders.lookup(...), or tools.context7["resolve-id"](...).
type Tools map[string]any

// SearchNamespace is the reserved namespace of the built-in tools.
const SearchNamespace = "$codemode"

// toolEntry is a tool with its resolved path and schema.
type toolEntry struct {
	path     []string
	name     string // dot-joined path
	tool     Tool
	resolved *jsonschema.Resolved
}

// flatten walks the tree in sorted order and checks it.
func (t Tools) flatten() ([]*toolEntry, error) {
	var out []*toolEntry
	var walk func(prefix []string, node Tools) error
	walk = func(prefix []string, node Tools) error {
		keys := make([]string, 0, len(node))
		for k := range node {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			path := append(append([]string(nil), prefix...), k)
			if len(prefix) == 0 && k == SearchNamespace {
				return fmt.Errorf("codemode: the namespace %q is reserved", SearchNamespace)
			}
			switch v := node[k].(type) {
			case Tool:
				e, err := newEntry(path, v)
				if err != nil {
					return err
				}
				out = append(out, e)
			case *Tool:
				if v == nil {
					return fmt.Errorf("codemode: tool %s is nil", strings.Join(path, "."))
				}
				e, err := newEntry(path, *v)
				if err != nil {
					return err
				}
				out = append(out, e)
			case Tools:
				if err := walk(path, v); err != nil {
					return err
				}
			case map[string]any:
				if err := walk(path, Tools(v)); err != nil {
					return err
				}
			default:
				return fmt.Errorf("codemode: %s is a %T, want a Tool or Tools", strings.Join(path, "."), v)
			}
		}
		return nil
	}
	if err := walk(nil, t); err != nil {
		return nil, err
	}
	return out, nil
}

func newEntry(path []string, t Tool) (*toolEntry, error) {
	name := strings.Join(path, ".")
	if len(path) < 2 {
		return nil, fmt.Errorf("codemode: tool %q must be inside a namespace (tools.<namespace>.<tool>)", name)
	}
	if t.Run == nil {
		return nil, fmt.Errorf("codemode: tool %s has no Run function", name)
	}
	e := &toolEntry{path: path, name: name, tool: t}
	if t.Input != nil && !t.SkipInputValidation {
		r, err := t.Input.Resolve(nil)
		if err != nil {
			return nil, fmt.Errorf("codemode: tool %s: input schema: %w", name, err)
		}
		e.resolved = r
	}
	return e, nil
}
