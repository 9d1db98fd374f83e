package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/codemode-go/codemode/internal/spoof"
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
	// not enforced unless ValidateOutput is set: real services drift from
	// their declared schemas.
	Output *jsonschema.Schema

	// ValidateOutput checks every result against Output; a result that
	// does not match fails the call with InvalidToolOutput (the program
	// can catch it). For tools whose results the host controls and other
	// code relies on. Off by default.
	ValidateOutput bool

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

	// Compensate, when set, undoes a completed call of the tool (input is
	// the call's, output its result) when the transaction it was made in
	// is rolled back: see tools.$codemode.begin. An error is reported to
	// the program and in the audit, never hidden.
	Compensate func(ctx context.Context, input, output json.RawMessage) error

	// Types are the named types Input and Output refer to: see [Types].
	// Tools of one source share one Types. A tool with Types (even an
	// empty one) has its signature bounded in size, cut into parts that
	// tools.$codemode.types reads. Nil means none: every $ref is expanded
	// and the signature is not bounded.
	Types *Types

	// Annotations say what the tool does to the world, for the model (its
	// signature carries them as JSDoc tags) and for policies. Nil says
	// nothing: treat such a tool as one that may change anything.
	Annotations *Annotations
}

// Annotations describe a tool's effects, as MCP's tool annotations do.
// They are the tool author's claims, not something codemode checks. When
// a tool claims both ReadOnly and Destructive, the stricter claim holds:
// it is shown and treated as destructive, since a claim that it is
// harmless is worth nothing beside one that it is not.
type Annotations struct {
	// ReadOnly: the tool changes nothing. Ignored when Destructive is set.
	ReadOnly bool `json:"readOnly,omitempty"`
	// Destructive: the tool may delete or overwrite. It outweighs
	// ReadOnly.
	Destructive bool `json:"destructive,omitempty"`
	// Idempotent: calling it again with the same input changes nothing
	// more.
	Idempotent bool `json:"idempotent,omitempty"`
	// OpenWorld: the tool reaches beyond the systems the host controls
	// (the web, other people's services).
	OpenWorld bool `json:"openWorld,omitempty"`
}

// tags are the JSDoc tags a signature carries for the annotations.
func (a *Annotations) tags() []string {
	if a == nil {
		return nil
	}
	var tags []string
	switch {
	case a.Destructive:
		tags = append(tags, "@destructive")
	case a.ReadOnly:
		tags = append(tags, "@readonly")
	}
	if a.Idempotent && !a.readOnly() {
		tags = append(tags, "@idempotent")
	}
	if a.OpenWorld {
		tags = append(tags, "@openworld")
	}
	return tags
}

// readOnly reports a read-only claim that no destructive claim outweighs.
func (a *Annotations) readOnly() bool { return a != nil && a.ReadOnly && !a.Destructive }

// publicMessage is what the program sees of a tool's error: its message
// when it was made with ToolError, else "Tool execution failed".
func publicMessage(err error) string {
	if msg, safe := safeMessage(err); safe {
		return msg
	}
	return "Tool execution failed"
}

// NewTool makes a Tool from a typed function, inferring the input and
// output schemas from In and Out (see jsonschema.For), with one change:
// a slice is an array, never null (its signature reads `string[]`, not
// `null | string[]`), and the tool returns [] where its Out holds a nil
// slice. The input is decoded into In after validation.
func NewTool[In, Out any](description string, fn func(ctx context.Context, in In) (Out, error)) (Tool, error) {
	in, err := goSchema[In]()
	if err != nil {
		return Tool{}, fmt.Errorf("codemode: input schema: %w", err)
	}
	out, err := goSchema[Out]()
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
			o, err := fn(ctx, v)
			if err != nil {
				return nil, err
			}
			return emptyArrays(o, out), nil
		},
	}, nil
}

// ToolError returns an error whose message is safe to show the program
// and the model. Use it for expected failures the model can act on
// ("order o-9 not found"); everything else stays private.
func ToolError(message string) error { return &safeError{msg: message} }

// ToolErrorf is [ToolError] with formatting.
func ToolErrorf(format string, args ...any) error {
	return &safeError{msg: fmt.Sprintf(format, args...)}
}

// ToolErrorCause is [ToolError] with a private cause: the program and the
// model see only message, while the host's OnToolCallEnd (its Err) and
// errors.Is and errors.As reach cause.
func ToolErrorCause(message string, cause error) error {
	return &safeError{msg: message, cause: cause}
}

type safeError struct {
	msg   string
	cause error
}

func (e *safeError) Error() string { return e.msg }
func (e *safeError) Unwrap() error { return e.cause }

// ToolErrorMessage returns the message of the ToolError in err's chain —
// what a program is shown when a call fails with err — with ok false when
// err has none (the program is shown "Tool execution failed"). A host
// that records results to deliver later keeps this, not err's text.
func ToolErrorMessage(err error) (message string, ok bool) { return safeMessage(err) }

// safeMessage returns the message a tool error may show, and whether it is
// a ToolError.
func safeMessage(err error) (string, bool) {
	var s *safeError
	if errors.As(err, &s) {
		return s.msg, true
	}
	return "", false
}

// Node is a value of a tool tree: a [Tool], or a [Tools] namespace of
// more nodes. No other type implements it, so a tree that compiles holds
// only tools and namespaces.
type Node interface{ isNode() }

func (Tool) isNode()  {}
func (Tools) isNode() {}

// Tools is a tree of tools: each key names a [Tool] or a nested Tools
// namespace. A program calls a tool by its path: tools.orders.lookup(...),
// or tools.context7["resolve-id"](...). Keys follow [CheckName];
// "$codemode" is reserved at the top level for the built-in search.
type Tools map[string]Node

// BuiltinNamespace is the reserved namespace of the built-in tools.
const BuiltinNamespace = "$codemode"

// ErrInvalidName is wrapped by the errors of [CheckName], and by New's for
// a tree with such a name.
var ErrInvalidName = errors.New("invalid tool name")

// reservedNames cannot be path segments: the tools object answers "then"
// and "toJSON" itself, so that awaiting a namespace or serializing it
// behaves like any other object. (Other names an object carries, such as
// constructor or __proto__, work: the tools object is a proxy.)
var reservedNames = map[string]bool{"then": true, "toJSON": true}

// CheckName reports whether name can be a segment of a tool path. Any
// non-empty string works (a program writes tools.ns["odd name"]), in any
// script, except "then" and "toJSON", which the tools object answers
// itself, a name that is not valid UTF-8, and a name holding a character
// that does not show as itself: an invisible or format character (U+200B
// and the other zero-width characters, U+00AD, U+FEFF), a bidirectional
// control (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C), a
// control character (NUL, tab, newline ...), a line or paragraph
// separator, a space other than U+0020, a private-use or unassigned code
// point, or a compatibility form that NFKC normalization would change
// (fullwidth ｒｅｆｕｎｄ, the ligature ﬁ, a decomposed accent). Such a
// name would show in signatures as a different name, or as the very name
// of the tool beside it. It is the one rule New and the adapters (openapi,
// mcp) apply.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: a name is empty", ErrInvalidName)
	case reservedNames[name]:
		return fmt.Errorf("%w: %q is reserved in programs", ErrInvalidName, name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%w: %s holds a NUL character", ErrInvalidName, spoof.Quote(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidName, spoof.Quote(name))
	}
	if i, j := spoof.Find(name); i >= 0 {
		return fmt.Errorf("%w: %s holds %s, which does not show as itself (an invisible, bidirectional or control character, or a compatibility form of another)",
			ErrInvalidName, spoof.Quote(name), spoof.Runes(name[i:j]))
	}
	return nil
}

// SafeName returns name changed as little as possible to pass
// [CheckName]: a character that does not show as itself (NUL included) is
// spelled out as {U+200B}, so that the name cannot pass for the one it
// imitates (a byte that is not UTF-8 becomes {U+FFFD}); a reserved name
// gets a "_" suffix, and an empty name becomes "_". Adapters use it to
// name tools after what an upstream calls them.
func SafeName(name string) string {
	if i, _ := spoof.Find(name); i >= 0 {
		var b strings.Builder
		for {
			i, j := spoof.Find(name)
			if i < 0 {
				break
			}
			b.WriteString(name[:i])
			for _, r := range name[i:j] {
				fmt.Fprintf(&b, "{U+%04X}", r)
			}
			name = name[j:]
		}
		b.WriteString(name)
		name = b.String()
	}
	if name == "" {
		return "_"
	}
	if reservedNames[name] {
		return name + "_"
	}
	return name
}

// Walk calls fn for every tool of the tree with its path, in sorted order,
// and stops at fn's first error. It reports a node that is neither a Tool
// nor a Tools (a nil *Tool), and a name [CheckName] refuses.
func (t Tools) Walk(fn func(path []string, tool Tool) error) error {
	return t.walk(nil, fn)
}

func (t Tools) walk(prefix []string, fn func([]string, Tool) error) error {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		path := append(append(make([]string, 0, len(prefix)+1), prefix...), k)
		if err := CheckName(k); err != nil && !(len(prefix) == 0 && k == BuiltinNamespace) {
			return fmt.Errorf("%s: %w", jsPath(path), err)
		}
		var err error
		switch v := t[k].(type) {
		case Tool:
			err = fn(path, v)
		case *Tool:
			if v == nil {
				return fmt.Errorf("%s is a nil *Tool", jsPath(path))
			}
			err = fn(path, *v)
		case Tools:
			err = v.walk(path, fn)
		default: // a nil Node
			return fmt.Errorf("%s is nil, want a Tool or Tools", jsPath(path))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ErrNameClash is wrapped by Merge's error when two trees use one name.
var ErrNameClash = errors.New("tool name clash")

// Merge combines tool sources, each owning its top-level names (the
// namespaces of an OpenAPI document, of MCP servers, of the host's own
// tools). A name in two trees is an error wrapping ErrNameClash that
// names it. The trees are not modified; the result shares their nodes.
func Merge(trees ...Tools) (Tools, error) {
	out := Tools{}
	for _, t := range trees {
		for k, v := range t {
			if _, taken := out[k]; taken {
				return nil, fmt.Errorf("%w: %q is given twice", ErrNameClash, k)
			}
			out[k] = v
		}
	}
	return out, nil
}

// toolEntry is a tool with its resolved path and schema.
type toolEntry struct {
	path     []string
	name     string // dot-joined path
	tool     Tool
	resolved *jsonschema.Resolved
	// output is the resolved Output schema when ValidateOutput is set.
	output *jsonschema.Resolved

	// An input that refers to named types is resolved on its first call,
	// when the types it uses are converted.
	lazyInput    bool
	resolveOnce  sync.Once
	lazyResolved *jsonschema.Resolved

	sigOnce sync.Once
	sig     CatalogEntry
}

// flatten checks the tree and lists its tools in sorted order.
func (t Tools) flatten() ([]*toolEntry, error) {
	var out []*toolEntry
	err := t.Walk(func(path []string, tool Tool) error {
		if path[0] == BuiltinNamespace {
			return fmt.Errorf("the namespace %q is reserved", BuiltinNamespace)
		}
		e, err := newEntry(path, tool)
		if err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

func newEntry(path []string, t Tool) (*toolEntry, error) {
	name := strings.Join(path, ".")
	if len(path) < 2 {
		return nil, fmt.Errorf("tool %q must be inside a namespace (tools.<namespace>.<tool>)", name)
	}
	if t.Run == nil {
		return nil, fmt.Errorf("tool %s has no Run function", jsPath(path))
	}
	e := &toolEntry{path: path, name: name, tool: t}
	if t.Input != nil && !t.SkipInputValidation && t.Types != nil {
		e.lazyInput = true
	} else if t.Input != nil && !t.SkipInputValidation {
		r, err := t.Input.Resolve(nil)
		if err != nil {
			return nil, fmt.Errorf("tool %s: input schema: %w", jsPath(path), err)
		}
		e.resolved = r
	}
	if t.ValidateOutput {
		if t.Output == nil {
			return nil, fmt.Errorf("tool %s: ValidateOutput is set but Output is nil", jsPath(path))
		}
		if t.Types != nil {
			return e, nil // resolved by New, with the types
		}
		r, err := t.Output.Resolve(nil)
		if err != nil {
			return nil, fmt.Errorf("tool %s: output schema: %w", jsPath(path), err)
		}
		e.output = r
	}
	return e, nil
}
