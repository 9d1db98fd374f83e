package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/codemode-go/codemode/internal/sandbox"
	"github.com/google/jsonschema-go/jsonschema"
)

// Admission.
//
// Every call the program makes passes admit, in call order, before it can
// run: the tool must exist, the run must have calls left, the input must
// fit the tool's schema, and then the host decides. Built-ins that only
// read (search) or keep the session's values run at once; every call of a
// host tool is judged by the policy, inside a transaction too, and a
// transaction's begin is judged by every tool it declares. Nothing an
// earlier decision said can turn a later Deny into an Allow.

// admitted is a call that passed the checks, with what it needs to run.
type admitted struct {
	Call
	run func(context.Context, json.RawMessage) (any, error)
	// output validates a host tool's result when the tool asks for it.
	output *jsonschema.Resolved
	// host: a tool of the host's, not a built-in.
	host bool
	// tx is the transaction the call was made in; nil outside one.
	tx *transaction
	// free: the call takes no concurrency slot (transaction built-ins,
	// which may wait for the transaction's own calls).
	free bool
}

// admit is called by the sandbox, in call order, for every tool call.
func (ex *execution) admit(c sandbox.Call) (sandbox.Work, error) {
	builtin, entry, err := ex.target(c)
	if err != nil {
		return nil, err
	}
	if err := ex.checkCallLimit(c.Path); err != nil {
		return nil, err
	}
	a := &admitted{Call: Call{Path: c.Path, Input: c.Input, RunID: ex.runID, Session: ex.session}, host: entry != nil}
	if builtin != nil {
		if builtin.check != nil {
			if err := builtin.check(ex.rt, c.Input); err != nil {
				return nil, invalidInput(c.Path, err)
			}
		}
		a.Name, a.free = BuiltinNamespace+"."+builtin.name, builtin.transaction
	} else {
		if err := ex.rt.validateInput(entry, c); err != nil {
			return nil, err
		}
		a.Name, a.Annotations, a.run, a.output = entry.name, entry.tool.Annotations, entry.tool.Run, entry.output
	}
	if a.Index, err = ex.reserve(a); err != nil {
		return nil, err
	}
	d := Decision{Verdict: Allow}
	switch {
	case builtin != nil:
		a.run = builtin.serve(ex, a.Index)
		if builtin.name == "begin" {
			d = ex.judgeBegin(a)
		}
	default:
		if a.tx, err = ex.txFor(a.Name, a.Path); err != nil {
			ex.deny(a.Index, len(a.Input))
			return nil, &sandbox.CallError{Kind: string(ToolFailure), Message: err.Error()}
		}
		d = ex.judge(a.Call)
	}
	return ex.decided(c.ID, a, d)
}

// target finds what a call calls: a built-in or a host tool.
func (ex *execution) target(c sandbox.Call) (builtin *builtinTool, entry *toolEntry, err error) {
	if b := ex.rt.builtin(c.Path); b != nil {
		return b, nil, nil
	}
	key := c.Key
	if key == "" {
		key = pathKey(c.Path)
	}
	if entry = ex.rt.index[key]; entry == nil {
		return nil, nil, &sandbox.CallError{Kind: string(UnknownTool), Message: fmt.Sprintf("%s is not a tool", jsPath(c.Path))}
	}
	return nil, entry, nil
}

// checkCallLimit refuses a call past MaxToolCalls.
func (ex *execution) checkCallLimit(path []string) error {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	limit := ex.lim.MaxToolCalls
	if limit < 0 || (limit > 0 && ex.admitted >= limit) {
		return &sandbox.CallError{Kind: string(ToolCallLimitExceeded),
			Message: fmt.Sprintf("the run may make at most %d tool calls; %s was not called", max(limit, 0), jsPath(path))}
	}
	return nil
}

func invalidInput(path []string, err error) error {
	return &sandbox.CallError{Kind: string(InvalidToolInput), Message: "input for " + jsPath(path) + " is invalid: " + err.Error()}
}

// validateInput checks a host tool's input against its schema.
func (rt *Runtime) validateInput(entry *toolEntry, c sandbox.Call) error {
	resolved := entry.resolved
	if entry.lazyInput {
		entry.resolveOnce.Do(func() {
			// A schema that does not resolve is left to the tool, as
			// SkipInputValidation would.
			entry.lazyResolved, _ = rt.resolveWithTypes(entry.tool.Types, entry.tool.Input)
		})
		resolved = entry.lazyResolved
	}
	if resolved == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(c.Input, &v); err != nil {
		return &sandbox.CallError{Kind: string(InvalidToolInput), Message: "input for " + jsPath(c.Path) + " is not JSON"}
	}
	if err := resolved.Validate(v); err != nil {
		return invalidInput(c.Path, err)
	}
	return nil
}

// reserve gives an admitted call its audit index and counts it as under
// way, unless the run has as many calls or bytes under way as it may.
func (ex *execution) reserve(a *admitted) (int, error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.pending >= maxPendingCalls || int64(ex.pendingBytes+len(a.Input)) > ex.lim.MaxMemoryBytes {
		return 0, &sandbox.CallError{Kind: string(ToolCallLimitExceeded),
			Message: fmt.Sprintf("%s was not called: %d calls with %d bytes of input are already waiting or running, and a run may have at most %d calls and %d bytes of input under way; await calls before starting more",
				jsPath(a.Path), ex.pending, ex.pendingBytes, maxPendingCalls, ex.lim.MaxMemoryBytes)}
	}
	ex.pending++
	ex.pendingBytes += len(a.Input)
	index := ex.admitted
	ex.admitted++
	if !ex.frozen {
		ex.calls = append(ex.calls, ToolCall{Name: a.Name, StartMs: ex.sinceStart(time.Now())})
	}
	return index, nil
}

// judge asks the policy about a call of a host tool. Without a policy, a
// suspendable run holds every call and Execute runs it.
func (ex *execution) judge(req Call) Decision {
	switch {
	case ex.rt.opts.Policy != nil:
		d := ex.rt.decide(ex.ctx, req)
		if d.Verdict == Hold && !ex.hold {
			d = Decision{Verdict: Allow}
		}
		return d
	case ex.hold:
		return Decision{Verdict: Hold}
	}
	return Decision{Verdict: Allow}
}

// judgeBegin judges a transaction's begin by the tools it declares: the
// policy is asked about each (Call.Declared, with no input, since
// the calls are not made yet). One denied tool denies the begin; else one
// asked about makes the begin a question naming every tool with its
// annotations. The calls themselves are still judged one by one when
// they are made: approving a begin approves opening the transaction, not
// its calls.
func (ex *execution) judgeBegin(a *admitted) Decision {
	if ex.rt.opts.Policy == nil {
		return Decision{Verdict: Allow}
	}
	touches, _ := ex.rt.parseTouches(a.Input) // checked at admission
	var asks, lines []string
	for _, name := range touches {
		e := ex.rt.byName[name]
		req := Call{Index: a.Index, Name: e.name, Path: e.path, Annotations: e.tool.Annotations,
			RunID: ex.runID, Session: ex.session, Declared: true}
		d := ex.rt.decide(ex.ctx, req)
		line := "- " + jsPath(e.path) + annotationNote(e.tool.Annotations)
		switch d.Verdict {
		case Deny:
			msg := "the transaction declares " + e.name + ", which is denied"
			if d.Reason != "" {
				msg += " (" + d.Reason + ")"
			}
			return Decision{Verdict: Deny, Reason: msg}
		case Ask:
			asks = append(asks, e.name)
			if d.Reason != "" {
				line += ": " + d.Reason
			}
		}
		lines = append(lines, line)
	}
	if len(asks) == 0 {
		return Decision{Verdict: Allow}
	}
	return Decision{Verdict: Ask, Reason: "Allow a transaction that may call these tools? (Each call is still judged when it is made.)\n" +
		strings.Join(lines, "\n")}
}

// annotationNote is " (read-only, idempotent)" for a tool's annotations,
// or " (no annotations: it may change anything)".
func annotationNote(a *Annotations) string {
	tags := a.tags()
	if len(tags) == 0 {
		return " (no annotations: it may change anything)"
	}
	words := make([]string, len(tags))
	for i, t := range tags {
		words[i] = strings.TrimPrefix(t, "@")
	}
	return " (" + strings.Join(words, ", ") + ")"
}

// decided turns a decision about an admitted call into what the sandbox
// does with it: an error, a held call, or work.
func (ex *execution) decided(id int, a *admitted, d Decision) (sandbox.Work, error) {
	if d.Verdict == Ask && d.Reason != "" {
		// Whoever approves sees all of the input, or nothing.
		if n := len(a.Shown()); n > ex.rt.opts.MaxAskInputBytes {
			d = Decision{Verdict: Deny, Reason: fmt.Sprintf("its input is %d bytes of JSON, more than the %d a person can be asked to approve; pass less",
				n, ex.rt.opts.MaxAskInputBytes)}
		}
	}
	switch {
	case d.Verdict == Deny:
		ex.deny(a.Index, len(a.Input))
		err := deniedError(a.Path, d.Reason)
		ex.reportDenied(ex.ctx, a.Call, err.Message)
		return nil, err
	case d.Verdict == Hold:
		d.Reason = "" // nobody is asked
		fallthrough
	case d.Verdict == Ask && ex.hold:
		ex.mu.Lock()
		ex.held[id] = heldCall{index: a.Index, input: a.Input, reason: d.Reason, tx: txID(a.tx)}
		ex.mu.Unlock()
		return nil, sandbox.ErrHold
	}
	ex.startTxCall(a.tx)
	var slot *ticket
	if d.Verdict == Allow && !a.free {
		slot = ex.limiter.enqueue()
	}
	return func(ctx context.Context) (json.RawMessage, error) {
		defer ex.finished(len(a.Input))
		defer ex.endTxCall(a.tx)
		if d.Verdict == Ask {
			// Options.Approve decides on the call's goroutine, so a person
			// may take their time (within the run's); the call takes its
			// place in the concurrency queue once approved.
			if ans := ex.rt.approve(ctx, a.Call, d.Reason); ans.Verdict != Allow {
				ex.deny(a.Index, 0)
				err := deniedError(a.Path, ans.Reason)
				ex.reportDenied(ctx, a.Call, err.Message)
				return nil, err
			}
			if !a.free {
				slot = ex.limiter.enqueue()
			}
		}
		return ex.perform(ctx, slot, a)
	}, nil
}

// deny records a call the policy refused; inputBytes leave the pending
// counts (zero when the call's work does that itself).
func (ex *execution) deny(index, inputBytes int) {
	ex.mu.Lock()
	if index < len(ex.calls) {
		ex.calls[index].Outcome = OutcomeDenied
	}
	if inputBytes > 0 {
		ex.pending--
		ex.pendingBytes -= inputBytes
	}
	ex.mu.Unlock()
}

// reportDenied tells the hooks about a denied call, as about any other
// call that reached a verdict: its start and at once its end, with
// OutcomeDenied and the message the program saw. Nothing is reported once
// the run has ended.
func (ex *execution) reportDenied(ctx context.Context, c Call, message string) {
	if ex.rt.opts.OnToolCallStart == nil && ex.rt.opts.OnToolCallEnd == nil {
		return
	}
	ex.mu.Lock()
	if ex.over {
		ex.mu.Unlock()
		return
	}
	ex.ends.Add(1)
	ex.mu.Unlock()
	defer ex.ends.Done()
	ctx = withCall(ctx, c)
	ex.rt.hookStart(ctx, c)
	ex.rt.hookEnd(ctx, CallEnd{Call: c, Outcome: OutcomeDenied, Message: message})
}

// deniedError is what the program sees of a denied call.
func deniedError(path []string, reason string) *sandbox.CallError {
	msg := jsPath(path) + " was denied"
	if reason != "" {
		msg += ": " + reason
	}
	return &sandbox.CallError{Kind: string(ToolFailure), Message: msg}
}

// decide asks the policy. A panic, and any answer but Allow, Deny or
// Ask (Unset included), deny the call.
func (rt *Runtime) decide(ctx context.Context, req Call) (d Decision) {
	defer func() {
		if p := recover(); p != nil {
			d = Decision{Verdict: Deny, Reason: "the host's policy failed"}
		}
	}()
	d = rt.opts.Policy(ctx, req)
	if d.Verdict != Allow && d.Verdict != Deny && d.Verdict != Ask && d.Verdict != Hold {
		d = Decision{Verdict: Deny, Reason: "the host's policy gave no verdict"}
	}
	if d.Verdict == Ask && d.Reason == "" {
		d.Reason = "allow " + req.Name + "?"
	}
	return d
}

// approve asks Options.Approve about a call the policy asked for; without
// it, nobody can approve, and the call is denied.
func (rt *Runtime) approve(ctx context.Context, req Call, question string) (d Decision) {
	if rt.opts.Approve == nil {
		return Decision{Verdict: Deny, Reason: "it needs approval, and nobody can approve it here"}
	}
	defer func() {
		if p := recover(); p != nil {
			d = Decision{Verdict: Deny, Reason: "the approval failed"}
		}
	}()
	d = rt.opts.Approve(ctx, req, question)
	if ctx.Err() != nil {
		return Decision{Verdict: Deny, Reason: "the run ended before an answer came"}
	}
	if d.Verdict != Allow && d.Reason == "" {
		d.Reason = "not approved"
	}
	return d
}
