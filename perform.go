package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/codemode-go/codemode/internal/sandbox"
	"github.com/google/jsonschema-go/jsonschema"
	"go.opentelemetry.io/otel/trace"
)

// A call's way once admitted: perform waits for its concurrency slot and
// reports its start and end exactly once (running), and invoke runs the
// tool and checks its output.

// perform runs an admitted call once it has its concurrency slot (nil
// for calls that take none).
func (ex *execution) perform(ctx context.Context, slot *ticket, a *admitted) (json.RawMessage, error) {
	failed := &sandbox.CallError{Kind: string(ToolFailure), Message: "Tool execution failed"}
	if slot != nil {
		if err := slot.wait(ctx); err != nil {
			return nil, failed // it never started: nothing to report
		}
		defer ex.limiter.release()
	}
	if a.tx != nil && ex.txRolledBack(a.tx) {
		return nil, &sandbox.CallError{Kind: string(ToolFailure), Message: jsPath(a.Path) + " did not run: its transaction was rolled back first"}
	}
	// A call made in a transaction is followed until it returns, within
	// the grace, so that what it did is known and can be undone.
	follow := ctx
	if a.tx != nil {
		follow = ex.grace
	}
	c := ex.begin(ctx, follow, a.Call)
	if c == nil {
		return nil, failed // the run ended first
	}
	r := invoke(c.ctx, a.Call, a.run, a.output)
	switch r.end.Outcome {
	case OutcomeOK:
		if a.host {
			// Before the end is reported: once it is, the run may be
			// settling the transaction.
			ex.txRecord(a.tx, a.Index, a.Name, a.Path, a.Input, r.out)
		}
		c.end(r.end, r.out)
		return r.out, nil
	case OutcomeInvalidOutput:
		c.end(r.end, nil)
		return nil, &sandbox.CallError{Kind: string(InvalidToolOutput), Message: jsPath(a.Path) + " returned " + r.invalid.Error()}
	}
	c.end(r.end, nil)
	return nil, &sandbox.CallError{Kind: string(ToolFailure), Message: r.end.Message}
}

// invoked is what invoke found: the call's end (outcome, message, the
// tool's error) and, when it succeeded, its output as JSON; invalid is
// the output check's complaint.
type invoked struct {
	end     CallEnd
	out     json.RawMessage
	invalid error
}

// invoke runs a tool with a call's input and checks what it returns. It is
// how every tool call runs, in a run (perform) and as a pending call
// (RunPending); the hooks and spans are the caller's. A failure after
// ctx ended is a cancellation.
func invoke(ctx context.Context, c Call, run func(context.Context, json.RawMessage) (any, error), output *jsonschema.Resolved) invoked {
	r := invoked{end: CallEnd{Call: c}}
	start := time.Now()
	v, err := callTool(ctx, run, c.Input)
	r.end.Duration = time.Since(start)
	if err != nil {
		r.end.Outcome, r.end.Message, r.end.Err = OutcomeError, publicMessage(err), err
		if ctx.Err() != nil {
			r.end.Outcome = OutcomeCancelled
		}
		return r
	}
	out, err := toolOutput(v)
	if err == nil && output != nil {
		err = validateOutput(output, out)
	}
	if err != nil {
		r.end.Outcome, r.end.Message, r.invalid = OutcomeInvalidOutput, err.Error(), err
		return r
	}
	r.end.Outcome, r.out = OutcomeOK, out
	return r
}

// running is a call that started: its end is reported exactly once, when
// the tool returns or, if that is later, when its context ends (the run
// ended, or the call lost a Promise.race) — a tool that ignores its
// context is not waited for.
type running struct {
	ex    *execution
	ctx   context.Context // the call's, carrying its span
	span  trace.Span      // nil without a tracer
	start time.Time
	once  sync.Once
	stop  func() bool
}

// begin reports a call's start, unless the run has ended or the call's
// context has (then it must not run, and begin returns nil). Its end is
// reported as cancelled when follow ends first: the call's own context,
// or for calls in a transaction the run's grace.
func (ex *execution) begin(ctx, follow context.Context, s Call) *running {
	ex.mu.Lock()
	if ex.over || ctx.Err() != nil {
		ex.mu.Unlock()
		return nil
	}
	ex.ends.Add(1)
	ex.mu.Unlock()
	c := &running{ex: ex, ctx: withCall(ctx, s)}
	if t := ex.rt.tel; t != nil {
		c.ctx, c.span = t.startCall(c.ctx, s)
	}
	ex.rt.hookStart(c.ctx, s)
	c.start = time.Now()
	c.stop = context.AfterFunc(follow, func() {
		c.report(CallEnd{Call: s, Outcome: OutcomeCancelled}, nil)
	})
	return c
}

// end reports the tool's own outcome, unless the cancellation was
// reported first; out is the tool's output when it succeeded.
func (c *running) end(e CallEnd, out json.RawMessage) {
	c.stop()
	c.report(e, out)
}

func (c *running) report(e CallEnd, out json.RawMessage) {
	c.once.Do(func() {
		e.Duration = time.Since(c.start)
		ex := c.ex
		ex.mu.Lock()
		if e.Index < len(ex.calls) {
			ex.calls[e.Index].Outcome = e.Outcome
			ex.calls[e.Index].DurationMs = e.Duration.Milliseconds()
		}
		ex.mu.Unlock()
		ex.rt.hookEnd(c.ctx, e)
		// After the hook, so it can still add to the span; before Done,
		// so no span outlives Execute.
		if t := ex.rt.tel; t != nil {
			t.endCall(c.ctx, c.span, e, out)
		}
		ex.ends.Done()
	})
}

// callTool runs a tool, turning a panic into a private error.
func callTool(ctx context.Context, run func(context.Context, json.RawMessage) (any, error), input json.RawMessage) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("tool panicked: %v", p)
		}
	}()
	return run(ctx, input)
}

func (rt *Runtime) hookStart(ctx context.Context, s Call) {
	if h := rt.opts.OnToolCallStart; h != nil {
		func() {
			defer func() { _ = recover() }()
			h(ctx, s)
		}()
	}
}

func (rt *Runtime) hookEnd(ctx context.Context, e CallEnd) {
	if h := rt.opts.OnToolCallEnd; h != nil {
		func() {
			defer func() { _ = recover() }()
			h(ctx, e)
		}()
	}
}
