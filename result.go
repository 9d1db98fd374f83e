package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Result is the outcome of one run. It marshals to the JSON the model sees:
//
//	{"ok":true, "value":V, "logs":[...]?, "truncated":true?, "toolCalls":[...]}
//	{"ok":false, "error":{"kind":K, "message":M, "location":{...}?, "suggestions":[...]?}, "logs":[...]?, "truncated":true?, "toolCalls":[...]}
//	{"ok":false, "suspended":{"reason":R, "pending":[...]}, "toolCalls":[...]}
//
// The third is a run that has not ended (ExecuteSuspendable, Resume): it
// is neither a success nor a failure, and waits for the calls its audit
// lists as pending.
type Result struct {
	OK bool `json:"ok"`
	// Value is the program's return value as JSON (null when it returned
	// nothing). Set only when OK.
	Value json.RawMessage `json:"value,omitempty"`
	// Error says why the run failed. Set only when not OK, and not
	// Suspended.
	Error *Diagnostic `json:"error,omitempty"`
	// Suspended is set, instead of Error, when the run has not ended: it
	// waits for tool calls (a suspendable run's Result that comes with a
	// Suspended).
	Suspended *Suspension `json:"suspended,omitempty"`
	// Logs are the console lines, in order.
	Logs []string `json:"logs,omitempty"`
	// Truncated reports that MaxOutputBytes cut the value or the logs.
	Truncated bool `json:"truncated,omitempty"`
	// ToolCalls lists the admitted tool calls in admission order, whether
	// they succeeded or failed. Never nil.
	ToolCalls []ToolCall `json:"toolCalls"`
	// Content holds the images, audio and resources the program returned,
	// taken out of Value (Options.RichContent); the value names each by
	// its 1-based place here.
	Content []ContentItem `json:"content,omitempty"`
}

// Fit returns a copy of r cut to maxBytes as Options.MaxOutputBytes would
// cut it: a value whose JSON is over the budget becomes a string that
// says so (a failure's message is cut the same way), then log lines are
// kept from the start while they fit in what is left, and one marker line
// counts the rest; Truncated reports a cut. maxBytes reads as
// MaxOutputBytes does (zero: no limit). by names the budget in the
// markers the model reads ("maxTokens"); "" names the output limit. A
// host that hands a run's Result over in parts (a cell's wait) holds it
// to the budget its caller asked for.
func (r Result) Fit(maxBytes int, by string) Result {
	if r.Error != nil {
		d := *r.Error
		r.Error = &d
	}
	logs := r.Logs
	r.Logs = nil
	applyBudget(maxBytes, &r, len(r.Value), logs, 0, by)
	if r.Logs == nil {
		r.Logs = logs
	}
	return r
}

// Suspension says why a suspended run has not ended.
type Suspension struct {
	// Reason says what the run waits for, in a sentence: "waiting for 1
	// tool call: shop.listOrders (call 0)", or the policy's question
	// when it asked about one.
	Reason string `json:"reason"`
	// Pending are the audit indexes (ToolCall positions, PendingCall
	// indexes) of the calls it waits for.
	Pending []int `json:"pending"`
}

// ToolCall is one entry of the tool-call audit.
type ToolCall struct {
	// Name is the tool's dot-joined path, e.g. "orders.lookup".
	Name string `json:"name"`
	// Outcome is how the call ended; OutcomeCancelled when the run ended
	// (or a Promise.race was lost) first, or the call never started.
	Outcome Outcome `json:"outcome"`
	// StartMs is when the program made the call, in whole milliseconds
	// from the start of the run (of its first step, for a run suspended
	// and resumed): with DurationMs, it places the call on a time line.
	StartMs int64 `json:"startMs"`
	// DurationMs is how long the tool ran, in whole milliseconds.
	DurationMs int64 `json:"durationMs"`
}

// Err returns the run's failure as an error: nil when the run succeeded,
// else its *Diagnostic, whose Kind errors.Is matches:
//
//	if errors.Is(res.Err(), codemode.TimeoutExceeded) { ... }
func (r Result) Err() error {
	if r.Error == nil {
		return nil
	}
	return r.Error
}

// Diagnostic describes a failed run.
type Diagnostic struct {
	Kind    Kind   `json:"kind"`
	Message string `json:"message"`
	// Location is where in the program the failure arose, when known.
	Location *Location `json:"location,omitempty"`
	// Suggestions are fixes the model can apply.
	Suggestions []string `json:"suggestions,omitempty"`
	// Cause says, for an ExecutionFailure, where it came from (one of
	// the Cause constants): a host deciding whether to run the program
	// again needs to tell an engine that died from a program that threw.
	Cause string `json:"cause,omitempty"`
}

// Causes of an ExecutionFailure (Diagnostic.Cause).
const (
	// CauseProgram: the program threw, or can never finish; running it
	// again fails again.
	CauseProgram = "program"
	// CauseEngine: the engine instance died (a trap) or could not start;
	// running the program again may succeed.
	CauseEngine = "engine"
	// CauseHost: the host stopped the run — its context ended, or the
	// Runtime was closed.
	CauseHost = "host"
)

// CauseOf is the cause of the error Execute, ExecuteSuspendable or Resume
// returned with a Result, for a host that turns it into an
// ExecutionFailure of its own: CauseHost for a context that ended or a
// Runtime that was closed, CauseEngine for an engine that is missing or
// does not match, and "" for anything else.
func CauseOf(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrStopped), errors.Is(err, ErrClosed):
		return CauseHost
	case errors.Is(err, ErrEngineUnavailable), errors.Is(err, ErrEngineMismatch), errors.Is(err, ErrStateEngine):
		return CauseEngine
	}
	return ""
}

// Is reports whether target is d's Kind, so errors.Is(err, TimeoutExceeded)
// works on a Diagnostic.
func (d *Diagnostic) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == d.Kind
}

// Error implements error, so a Diagnostic can travel as one. Use
// [Result.Err] to get it as an error: a nil *Diagnostic in an error
// interface is not nil.
func (d *Diagnostic) Error() string {
	if d.Location != nil {
		return fmt.Sprintf("%s at %d:%d: %s", d.Kind, d.Location.Line, d.Location.Column, d.Message)
	}
	return string(d.Kind) + ": " + d.Message
}

// Location is a 1-based position in the program's own text.
type Location struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

// Kind classifies a failed run. The set is closed. A Kind is an error
// value, so errors.Is can match a Diagnostic against it.
type Kind string

func (k Kind) Error() string { return string(k) }

// The diagnostic kinds.
const (
	// ParseError: the program is not valid JavaScript or TypeScript, or is empty.
	ParseError Kind = "ParseError"
	// UnsupportedSyntax: valid syntax a program may not use (import, export).
	UnsupportedSyntax Kind = "UnsupportedSyntax"
	// UnknownTool: a call named no tool.
	UnknownTool Kind = "UnknownTool"
	// InvalidToolInput: a call's input failed the tool's input schema.
	InvalidToolInput Kind = "InvalidToolInput"
	// InvalidToolOutput: a tool returned something that is not plain data.
	InvalidToolOutput Kind = "InvalidToolOutput"
	// InvalidDataValue: the program passed or returned something that is
	// not plain data (a function, a cycle, a BigInt, a Promise, ...).
	InvalidDataValue Kind = "InvalidDataValue"
	// ToolCallLimitExceeded: the run made more tool calls than allowed.
	ToolCallLimitExceeded Kind = "ToolCallLimitExceeded"
	// TimeoutExceeded: the run took longer than its timeout.
	TimeoutExceeded Kind = "TimeoutExceeded"
	// MemoryLimitExceeded: the program used more memory than allowed.
	MemoryLimitExceeded Kind = "MemoryLimitExceeded"
	// ToolFailure: a tool failed.
	ToolFailure Kind = "ToolFailure"
	// ExecutionFailure: the program threw, can never finish, or the run
	// was cancelled.
	ExecutionFailure Kind = "ExecutionFailure"
)

var kinds = []Kind{
	ParseError, UnsupportedSyntax, UnknownTool, InvalidToolInput, InvalidToolOutput,
	InvalidDataValue, ToolCallLimitExceeded, TimeoutExceeded, MemoryLimitExceeded,
	ToolFailure, ExecutionFailure,
}

func isKind(s string) bool {
	for _, k := range kinds {
		if string(k) == s {
			return true
		}
	}
	return false
}
