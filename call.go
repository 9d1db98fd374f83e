package codemode

import (
	"context"
	"encoding/json"
	"time"
)

// Call describes one tool call of a run, the same way wherever a host
// meets it: a policy judging it, a person approving it, a pending call of
// a suspended run, the hooks, and the tool itself (CallFrom).
type Call struct {
	// Index is the call's place in the run's audit (Result.ToolCalls),
	// from 0.
	Index int `json:"index"`
	// Name is the tool's dot-joined path, Path its segments.
	Name string   `json:"name"`
	Path []string `json:"path"`
	// Input is the call's argument as JSON, exactly as the tool gets it
	// (it has passed the tool's input schema). Show it to a person as
	// Shown gives it, whole.
	Input json.RawMessage `json:"input"`
	// Annotations are the tool's (nil when it has none).
	Annotations *Annotations `json:"annotations,omitempty"`
	// RunID names the run (Suspended.RunID for a suspendable run), and
	// with Index names the call uniquely: a tool can derive an idempotency
	// key from the two. Session is the id the host gave the run's context
	// with WithSession.
	RunID   string `json:"runId,omitempty"`
	Session string `json:"session,omitempty"`
	// Declared marks, for a policy only, a tool a transaction's begin
	// declares (see tools.$codemode.begin): the policy is asked about each
	// before the transaction opens, with no Input, since no call is made
	// yet; a Deny for one denies the begin, an Ask makes it a question.
	// Each call is still judged, with its input, when it is made.
	Declared bool `json:"declared,omitempty"`
	// Compensating marks the context of a compensation (Tool.Compensate,
	// run when a transaction is rolled back): CallFrom gives the call it
	// undoes, so that a host that must not undo a call twice keys on its
	// RunID and Index.
	Compensating bool `json:"compensating,omitempty"`
}

// Shown is the call's input as a person should see it, whole: the same
// JSON value as Input written one way only — object keys sorted (of
// duplicate keys the last), no insignificant whitespace, numbers as
// written, and every character that displays as nothing, as a space or
// reorders its neighbours (controls, zero-width and bidirectional marks,
// spaces other than U+0020, private-use and unassigned characters,
// variation selectors) escaped as \uXXXX — so that no key order, padding
// or invisible character hides or disguises a part of it.
func (c Call) Shown() json.RawMessage {
	if len(c.Input) == 0 {
		return c.Input
	}
	s, err := canonicalJSON(c.Input)
	if err != nil {
		// Not JSON (a host's hand-made Call): shown as a string, whole.
		s, _ = json.Marshal(string(c.Input))
	}
	return s
}

// CallEnd is passed to Options.OnToolCallEnd when a call finishes.
type CallEnd struct {
	Call
	Duration time.Duration
	Outcome  Outcome
	// Message is what the program saw for a failure; empty on success.
	Message string
	// Err is the tool's own error, for the host's logs. It never reaches
	// the program unless it was made with ToolError.
	Err error
}

type callKey struct{}

// CallFrom returns the call a tool's context belongs to (the context
// given to Tool.Run, the hooks and Runtime.RunPending's tool): a tool
// that must not repeat an effect derives an idempotency key from its
// RunID and Index.
func CallFrom(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(Call)
	return c, ok
}

func withCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}
