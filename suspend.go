package codemode

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/codemode-go/codemode/internal/envelope"
	"github.com/codemode-go/codemode/internal/guest"
	"github.com/codemode-go/codemode/internal/sandbox"
	"go.opentelemetry.io/otel/trace"
)

// Suspended is a run stopped while it waits for tool calls; see
// [Runtime.ExecuteSuspendable].
type Suspended struct {
	// State is the run as bytes, for [Runtime.Resume] in this process or
	// any other whose Runtime has the same engine build, tool tree and
	// StateKey. It is authenticated, not encrypted: it holds the program,
	// its logs, the inputs of its calls, the results delivered so far and
	// whatever the program keeps in memory. Store it where the tool
	// results themselves may be kept. It is at most
	// Options.MaxStateBytes long.
	State []byte
	// Pending are the calls the run waits for, in the order they were
	// made. Each needs a result (Runtime.RunPending runs the tool; a host may
	// also answer for it, say with a human's decision). Results can be
	// delivered all at once or a few at a time.
	Pending []PendingCall
	// NextTimer, when not zero, is how long after suspending the
	// program's earliest timer is due (see
	// Options.TimeoutIncludesSuspended).
	NextTimer time.Duration
	// Deadline, when the run has a Timeout and
	// Options.TimeoutIncludesSuspended was set, is when it times out: a
	// Resume after it ends the run with TimeoutExceeded. Zero otherwise.
	Deadline time.Time
	// RunID names the run across its suspensions; Step counts them from
	// 1. A state can be resumed more than once (it is a value); a host
	// that must continue each step only once records RunID and Step.
	RunID string
	Step  int
}

// PendingCall is a tool call a suspended run waits for.
type PendingCall struct {
	// Call is the call, as the program made it (a transaction's begin has
	// no annotations: its Reason names each tool it declares with
	// theirs).
	Call
	// Reason is the policy's question when it asked about the call (see
	// Options.Policy); empty when the run holds every call.
	Reason string `json:"reason,omitempty"`
	// Deadline, when not zero, is when the run times out (see
	// Suspended.Deadline): RunPending does not start the call after it,
	// and ends the tool's context then.
	Deadline time.Time `json:"deadline,omitzero"`
	// Location is where in the program the call was made, as the stack
	// says (a program can make its stacks say other things: show it as
	// a pointer into the program, not as proof), when known.
	Location *Location `json:"location,omitempty"`
}

// CallResult is the result of a pending call, delivered by
// [Runtime.Resume].
type CallResult struct {
	// Index is the pending call's (its Call.Index).
	Index int
	// Output is the tool's result as JSON, used when Err is nil; empty
	// means null. It must be plain data (and match the tool's Output
	// schema when ValidateOutput is set), or the program sees
	// InvalidToolOutput.
	Output json.RawMessage
	// Err fails the call. As with Tool.Run, the program sees the message
	// of an error made with ToolError and "Tool execution failed" for
	// any other.
	Err error
	// Duration is how long the call took, for the audit.
	Duration time.Duration
	// Denied, when not empty, refuses the call instead (someone said no):
	// the program gets "<tool> was denied: <Denied>" as a ToolError, the
	// audit says denied, and Output and Err are not used.
	Denied string
}

// Errors of suspending and resuming runs. Resume returns them before any
// of the state reaches the engine.
var (
	// ErrNoStateKey: Options.StateKey is not set, so runs cannot suspend.
	ErrNoStateKey = errors.New("codemode: runs cannot suspend or resume without Options.StateKey")
	// ErrStateInvalid: the state is damaged, truncated, was not made by
	// codemode, was made with another StateKey, or is larger than
	// Options.MaxStateBytes.
	ErrStateInvalid = errors.New("codemode: the state is damaged or was not made with this StateKey")
	// ErrStateEngine: the state was made with another engine build, or
	// another engine image on the same build (another version of
	// codemode: see Runtime.ImageSum).
	ErrStateEngine = errors.New("codemode: the state was made with another engine build or image (another version of codemode)")
	// ErrStateTools: the state was made by a Runtime with another tool
	// tree (tools added, removed, or their schemas changed).
	ErrStateTools = errors.New("codemode: the state was made with another tool tree")
	// ErrStateCall: a result names a call the run is not waiting for, or
	// names one twice.
	ErrStateCall = errors.New("codemode: result for a call that is not pending")
)

// stateHeader is the Runtime's part of a state; the sandbox's follows it.
type stateHeader struct {
	Engine      string          `json:"engine"`
	Tools       string          `json:"tools"`
	RunID       string          `json:"runId"`
	Step        int             `json:"step"`
	Code        string          `json:"code"`
	Transformed bool            `json:"transformed,omitempty"`
	Limits      limits          `json:"limits"`
	Remaining   time.Duration   `json:"remaining,omitempty"` // of Timeout, when the run suspended
	NextTimer   time.Duration   `json:"nextTimer,omitempty"`
	SuspendedAt int64           `json:"suspendedAt"`     // Unix nanoseconds
	Began       int64           `json:"began,omitempty"` // Unix nanoseconds: when the run started
	Calls       []ToolCall      `json:"calls"`
	Admitted    int             `json:"admitted"`
	Held        []heldEntry     `json:"held"`
	Tx          *transaction    `json:"tx,omitempty"`
	RolledBack  []int           `json:"rolledBack,omitempty"` // transactions rolled back with calls held
	Session     string          `json:"session,omitempty"`    // of the step that suspended
	Sandbox     json.RawMessage `json:"sandbox"`              // the sandbox's header
}

// heldEntry links a sandbox call to its audit entry.
type heldEntry struct {
	Seq    int             `json:"seq"`   // sandbox call id
	Index  int             `json:"index"` // audit index, Call.Index
	Path   []string        `json:"path"`
	Input  json.RawMessage `json:"input"`
	Reason string          `json:"reason,omitempty"` // the policy's question
	Tx     *int            `json:"tx,omitempty"`     // the transaction it was made in
	// Where in the program the call was made (Location), when known.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// heldCall is a call a suspendable run holds, by its sandbox call id:
// its audit index, its input as judged (canonical), the policy's question
// and the transaction it was made in.
type heldCall struct {
	index  int
	input  json.RawMessage
	reason string
	tx     *int
}

// StateFormat names how this version seals states. A Runtime resumes
// states of its own format and of the formats before it, not of later
// ones: during an upgrade, a host that runs programs on several machines
// sends a run's steps to machines of its format or a later one.
const StateFormat = "CMSTATE4"

// stateKind is the envelope of a suspended run's state.
var stateKind = sealKind{magic: StateFormat, legacy: "CMSTATE3"}

// sealKind names a kind of envelope a Runtime seals: its magic, under
// which the MAC covers the snapshot's sum (envelope.SealSum), and legacy,
// the magic the same kind had when the MAC covered all its bytes, which
// still opens.
type sealKind struct{ magic, legacy string }

// ExecuteSuspendable runs code as Execute does, except that it never runs
// the host's tools itself: when the program has nothing left to do but
// wait for tool calls (and timers), the run stops, and its state comes back
// as a Suspended, holding the calls it waits for. The host gets their
// results however it likes — Runtime.RunPending, a queue of workers, a human's
// approval hours later — and continues the run with Resume, in this
// process or another. A run that ends without waiting for a call returns
// its Result as Execute would, with a nil Suspended. While a run is
// suspended, the Result returned with the Suspended holds only the audit so
// far, where the calls waiting have OutcomePending.
//
// Tools.$codemode.search runs at once, as in Execute. The concurrency
// limit does not apply to pending calls (the host runs them), nor do the
// hooks (Runtime.RunPending calls them). Runs cannot suspend without
// Options.StateKey (ErrNoStateKey).
func (rt *Runtime) ExecuteSuspendable(ctx context.Context, code string) (Result, *Suspended, error) {
	if len(rt.opts.StateKey) == 0 {
		return Result{ToolCalls: []ToolCall{}}, nil, ErrNoStateKey
	}
	if rt.isClosed() {
		return Result{ToolCalls: []ToolCall{}}, nil, ErrClosed
	}
	return rt.live(ctx, code, nil, func(runCtx context.Context) (*execution, sandbox.Result, stateHeader, *Result, error) {
		ex, sr, early, err := rt.start(runCtx, code, true)
		if early != nil {
			return nil, sr, stateHeader{}, early, err
		}
		h := stateHeader{RunID: ex.runID, Code: code}
		if ex.src.prog != nil {
			h.Transformed = ex.src.prog.Transformed
		}
		return ex, sr, h, nil, nil
	})
}

// Resume continues a suspended run with results of its pending calls
// (any number of them, in the order the program should see them
// arrive) and runs it until it ends or suspends again. The run keeps the
// limits it started with; its Timeout counts only the time it runs unless
// Options.TimeoutIncludesSuspended was set when it started. Results for
// calls that lost a Promise.race meanwhile are ignored, as a late answer
// would be.
//
// A state that fails authentication, comes from another engine build or
// tool tree, or results naming calls that are not pending, are refused
// with ErrStateInvalid, ErrStateEngine, ErrStateTools or ErrStateCall
// before anything runs.
func (rt *Runtime) Resume(ctx context.Context, state []byte, results ...CallResult) (Result, *Suspended, error) {
	none := Result{ToolCalls: []ToolCall{}}
	if len(rt.opts.StateKey) == 0 {
		return none, nil, ErrNoStateKey
	}
	h, inner, err := rt.openState(state)
	if err != nil {
		return none, nil, err
	}
	byIndex := map[int]heldEntry{}
	for _, e := range h.Held {
		byIndex[e.Index] = e
	}
	delivered := map[int]bool{}
	for _, r := range results {
		if _, ok := byIndex[r.Index]; !ok || delivered[r.Index] {
			return none, nil, fmt.Errorf("%w: call %d", ErrStateCall, r.Index)
		}
		delivered[r.Index] = true
	}
	if rt.isClosed() {
		return none, nil, ErrClosed
	}
	return rt.live(ctx, h.Code, nil, func(runCtx context.Context) (*execution, sandbox.Result, stateHeader, *Result, error) {
		ex, sr, early, err := rt.resume(runCtx, h, inner, results, byIndex, delivered)
		return ex, sr, *h, early, err
	})
}

// resume is Resume's preparation once the state is open and the Runtime
// has the run: the run rebuilt from the state, the results delivered, and
// the sandbox driving it until it ends or waits again. early is set when
// it was refused before anything ran.
func (rt *Runtime) resume(runCtx context.Context, h *stateHeader, inner sandbox.State, results []CallResult,
	byIndex map[int]heldEntry, delivered map[int]bool) (*execution, sandbox.Result, *Result, error) {
	none := &Result{ToolCalls: []ToolCall{}}
	sus, ok := rt.sb.(guest.Suspender)
	if !ok {
		return nil, sandbox.Result{}, none, errNoSuspend
	}
	src := &source{code: h.Code, transformed: h.Transformed}
	if !h.Transformed {
		src.prog = language.Wrap(h.Code)
	}
	ex := rt.newExecution(runCtx, src, h.Limits, true)
	ex.runID = h.RunID
	if h.Began != 0 {
		ex.began = time.Unix(0, h.Began)
	}
	ex.calls, ex.admitted = h.Calls, h.Admitted
	ex.tx, ex.rolledBack = h.Tx, h.RolledBack
	for _, e := range h.Held {
		ex.held[e.Seq] = heldCall{index: e.Index, input: e.Input, reason: e.Reason, tx: e.Tx}
		if !delivered[e.Index] {
			ex.pending++
			ex.pendingBytes += len(e.Input)
		}
	}
	now := time.Now()
	var away time.Duration
	if h.Limits.CountAway {
		away = max(now.Sub(time.Unix(0, h.SuspendedAt)), 0)
	}
	var deadline time.Time
	if h.Limits.Timeout > 0 {
		deadline = now.Add(h.Remaining - away)
	}
	ex.deadline = deadline
	var deliveries []sandbox.Delivery
	inTime := deadline.IsZero() || now.Before(deadline)
	var late []txStep
	for _, r := range results {
		// A result delivered after the deadline is recorded as what it
		// was — the call was made — but the program, which ended at its
		// deadline, never sees it.
		d, undo := ex.delivery(byIndex[r.Index], r)
		if inTime {
			deliveries = append(deliveries, d)
		}
		if undo != nil {
			late = append(late, *undo)
		}
	}
	if len(late) > 0 {
		// Calls of a transaction the program rolled back while they were
		// pending: they took effect, so they are undone now.
		ex.compensate(late, 0)
	}
	sr, err := sus.Resume(runCtx, ex.request(deadline), inner, deliveries, away)
	switch {
	case errors.Is(err, sandbox.ErrStateEngine):
		return nil, sr, none, ErrStateEngine
	case errors.Is(err, sandbox.ErrNotHeld):
		return nil, sr, none, fmt.Errorf("%w: %w", ErrStateCall, err)
	case errors.Is(err, sandbox.ErrStateCorrupt), errors.Is(err, sandbox.ErrStateMismatch):
		return nil, sr, none, fmt.Errorf("%w: %w", ErrStateInvalid, err)
	case errors.Is(err, sandbox.ErrClosed):
		return nil, sr, none, ErrClosed
	case err != nil:
		return nil, sr, none, err
	}
	return ex, sr, nil, nil
}

// delivery turns a result into what the program sees, and records the
// call's outcome in the audit and, when it completed, in its transaction.
// undo is set for a completed call whose transaction was rolled back
// while it was pending.
func (ex *execution) delivery(e heldEntry, r CallResult) (d sandbox.Delivery, undo *txStep) {
	d = sandbox.Delivery{ID: e.Seq}
	outcome, path := OutcomeOK, jsPath(e.Path)
	var oe *outputError
	var ce *cancelledError
	switch {
	case r.Denied != "":
		outcome = OutcomeDenied
		d.Err = deniedError(e.Path, r.Denied)
	case errors.Is(r.Err, ErrOutOfTime):
		outcome = OutcomeCancelled
		d.Err = &sandbox.CallError{Kind: string(ToolFailure), Message: path + " was not called: the run was out of time"}
	case errors.As(r.Err, &ce):
		outcome = OutcomeCancelled
		d.Err = &sandbox.CallError{Kind: string(ToolFailure), Message: publicMessage(ce.err)}
	case errors.As(r.Err, &oe):
		outcome = OutcomeInvalidOutput
		d.Err = &sandbox.CallError{Kind: string(InvalidToolOutput), Message: path + " returned " + oe.err.Error()}
	case r.Err != nil:
		outcome = OutcomeError
		d.Err = &sandbox.CallError{Kind: string(ToolFailure), Message: publicMessage(r.Err)}
	case isTxTool(e.Path):
		// An approved begin: the transaction opens now.
		touches, _ := ex.rt.parseTouches(e.Input)
		v, err := ex.openTx(e.Index, touches)
		if err != nil {
			outcome = OutcomeError
			msg, _ := safeMessage(err)
			d.Err = &sandbox.CallError{Kind: string(ToolFailure), Message: msg}
			break
		}
		d.Out, _ = json.Marshal(v)
	default:
		out, err := toolOutput(r.Output)
		if entry := ex.rt.index[pathKey(e.Path)]; err == nil && entry != nil && entry.output != nil {
			err = validateOutput(entry.output, out)
		}
		if err != nil {
			outcome = OutcomeInvalidOutput
			d.Err = &sandbox.CallError{Kind: string(InvalidToolOutput), Message: path + " returned " + err.Error()}
		} else if e.Tx != nil {
			step := txStep{Index: e.Index, Name: ex.calls[e.Index].Name, Path: e.Path, Input: e.Input, Output: out}
			switch {
			case ex.tx != nil && ex.tx.ID == *e.Tx:
				ex.txRecord(ex.tx, step.Index, step.Name, step.Path, step.Input, step.Output)
			case slices.Contains(ex.rolledBack, *e.Tx):
				undo = &step
			}
		}
		d.Out = out
	}
	if e.Index < len(ex.calls) {
		ex.calls[e.Index].Outcome = outcome
		ex.calls[e.Index].DurationMs = r.Duration.Milliseconds()
	}
	return d, undo
}

// step ends a part of a suspendable run: with its Result when the run
// ended, else with its new state.
func (rt *Runtime) step(ctx, runCtx context.Context, ex *execution, sr sandbox.Result, h stateHeader) (Result, *Suspended, error) {
	if sr.Suspended == nil {
		res, err := rt.finish(runCtx, ex, sr)
		return res, nil, rt.interruption(ctx, runCtx, err)
	}
	now := time.Now()
	ex.mu.Lock()
	ex.over = true
	ex.mu.Unlock()
	ex.ends.Wait() // search calls; none is running, but no hook may follow
	ex.mu.Lock()
	h.Calls = append([]ToolCall{}, ex.calls...)
	h.Admitted = ex.admitted
	h.Tx = ex.tx
	h.RolledBack = slices.Clone(ex.rolledBack)
	h.Session = ex.session
	ex.mu.Unlock()
	ex.dropGrace() // nothing of the run is running
	h.Engine, h.Tools = enginebin.SHA256, rt.treeSum()
	h.Step++
	h.Limits = ex.lim
	h.SuspendedAt = now.UnixNano()
	h.Began = ex.began.UnixNano()
	h.Remaining = 0
	if ex.lim.Timeout > 0 {
		h.Remaining = max(ex.deadline.Sub(now), 0)
	}
	h.NextTimer = sr.Suspended.NextTimer
	h.Held = h.Held[:0:0]
	for _, c := range sr.Suspended.Held {
		hc, ok := ex.held[c.ID]
		if !ok {
			return Result{ToolCalls: h.Calls}, nil, fmt.Errorf("codemode: internal error: held call %d has no audit entry", c.ID)
		}
		e := heldEntry{Seq: c.ID, Index: hc.index, Path: c.Path, Input: hc.input, Reason: hc.reason, Tx: hc.tx}
		if c.Line > 0 {
			ex.src.recompile()
			if l, col, ok := ex.src.prog.Position(c.Line, c.Column); ok {
				e.Line, e.Column = l, col
			}
		}
		h.Held = append(h.Held, e)
	}
	state, err := rt.sealState(runCtx, ex.deadline, &h, sr.Suspended.State)
	if f := rt.sealFailure(runCtx, ex, err); f != nil {
		// Sealing is part of the run, as the sandbox's part of the state
		// is: the run ends as it would have while running.
		sr.Suspended, sr.Failure = nil, f
		res, err := rt.finish(runCtx, ex, sr)
		return res, nil, rt.interruption(ctx, runCtx, err)
	}
	if err != nil {
		return Result{ToolCalls: h.Calls}, nil, err
	}
	audit := slices.Clone(h.Calls)
	for _, e := range h.Held {
		audit[e.Index].Outcome = OutcomePending
	}
	return Result{ToolCalls: audit, Suspended: suspension(&h)}, rt.suspended(&h, state), nil
}

// suspension says what a suspended run waits for.
func suspension(h *stateHeader) *Suspension {
	s := &Suspension{Pending: []int{}}
	var calls, asked []string
	for _, e := range h.Held {
		s.Pending = append(s.Pending, e.Index)
		name := fmt.Sprintf("%s (call %d)", h.Calls[e.Index].Name, e.Index)
		calls = append(calls, name)
		if e.Reason != "" {
			asked = append(asked, name+": "+e.Reason)
		}
	}
	switch {
	case len(asked) > 0:
		s.Reason = "waiting for approval: " + strings.Join(asked, "; ")
		if rest := len(calls) - len(asked); rest > 0 {
			s.Reason += fmt.Sprintf("; and for %d other pending calls", rest)
		}
	case len(calls) == 1:
		s.Reason = "waiting for 1 tool call: " + calls[0]
	case len(calls) > 1:
		s.Reason = fmt.Sprintf("waiting for %d tool calls: %s", len(calls), strings.Join(calls, ", "))
	default:
		s.Reason = fmt.Sprintf("waiting for a timer due in %s", h.NextTimer)
	}
	return s
}

// suspended describes a state from its header.
func (rt *Runtime) suspended(h *stateHeader, state []byte) *Suspended {
	s := &Suspended{State: state, RunID: h.RunID, Step: h.Step, NextTimer: h.NextTimer, Pending: []PendingCall{}}
	if h.Limits.Timeout > 0 && h.Limits.CountAway {
		s.Deadline = time.Unix(0, h.SuspendedAt).Add(h.Remaining)
	}
	for _, e := range h.Held {
		p := PendingCall{Call: Call{Index: e.Index, Name: h.Calls[e.Index].Name, Path: e.Path, Input: e.Input,
			RunID: h.RunID, Session: h.Session}, Reason: e.Reason, Deadline: s.Deadline}
		if e.Line > 0 {
			p.Location = &Location{Line: e.Line, Column: e.Column}
		}
		if entry := rt.index[pathKey(e.Path)]; entry != nil {
			p.Annotations = entry.tool.Annotations
		}
		s.Pending = append(s.Pending, p)
	}
	return s
}

// CompactState returns state recompressed to be kept: the same run, the
// same pending calls, about a quarter smaller for a small run (zstd in
// place of the S2 that the round trip of a suspended run uses, which is
// faster to write). Compact a state that will wait a while, for an
// approval say, before it is stored; Resume and Inspect take both forms,
// and compacting a compacted state changes nothing but, when it was
// sealed under one of PreviousStateKeys, the key. The state is
// authenticated first, as Resume does, and sealed again under StateKey.
// It stops with ctx's error between megabytes of the state.
func (rt *Runtime) CompactState(ctx context.Context, state []byte) ([]byte, error) {
	if len(rt.opts.StateKey) == 0 {
		return nil, ErrNoStateKey
	}
	h, inner, err := rt.openState(state)
	if err != nil {
		return nil, err
	}
	compact, err := sandbox.Compact(ctx, inner.Snapshot)
	if err != nil {
		if errors.Is(err, sandbox.ErrStateCorrupt) {
			return nil, fmt.Errorf("%w: %w", ErrStateInvalid, err)
		}
		return nil, err
	}
	head, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("codemode: the state could not be compacted: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return rt.seal(compact, sandbox.SnapshotSum(compact), stateKind, head), nil
}

// Inspect authenticates a state and describes it as the Suspended that
// returned it did: its pending calls (with their inputs as the program
// made them), run and step. A host that keeps only the state bytes reads
// the calls to serve from here rather than from anything stored beside
// them, which the StateKey does not protect.
func (rt *Runtime) Inspect(state []byte) (*Suspended, error) {
	if len(rt.opts.StateKey) == 0 {
		return nil, ErrNoStateKey
	}
	h, _, err := rt.openState(state)
	if err != nil {
		return nil, err
	}
	return rt.suspended(h, state), nil
}

// sealState writes a state: one envelope (internal/envelope) whose body
// is the engine's snapshot and whose header is the Runtime's, the
// sandbox's inside it, MACed under StateKey over the snapshot's sum. The
// sandbox left room after the snapshot for the rest. It stops with ctx's
// error, or errPastDeadline once deadline (when set) has passed, and with
// a *stateSizeError for a state over MaxStateBytes.
func (rt *Runtime) sealState(ctx context.Context, deadline time.Time, h *stateHeader, st sandbox.State) ([]byte, error) {
	h.Sandbox = st.Header
	head, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("codemode: the run could not be suspended: %w", err)
	}
	if n := len(st.Snapshot) + envelope.Overhead(stateKind.magic, len(head)); int64(n) > rt.opts.MaxStateBytes {
		return nil, &stateSizeError{n}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return nil, errPastDeadline
	}
	return rt.seal(st.Snapshot, snapshotSum(st), stateKind, head), nil
}

// snapshotSum is the sum of st's snapshot: the one the sandbox computed
// as it wrote the snapshot, or, for a State made another way, computed
// now. (A zero sum is no SHA-256 anyone will meet.)
func snapshotSum(st sandbox.State) [32]byte {
	if st.Sum == ([32]byte{}) {
		return sandbox.SnapshotSum(st.Snapshot)
	}
	return st.Sum
}

// seal seals an envelope of kind k (a state, a REPL state) under StateKey,
// its MAC over sum, the body's sum, and keeps a copy of it
// (sealedStates).
func (rt *Runtime) seal(body []byte, sum [32]byte, k sealKind, head []byte) []byte {
	out := envelope.SealSum(body, sum, k.magic, head, rt.opts.StateKey)
	rt.sealed.add(out)
	return out
}

// open opens an envelope of kind k sealed under one of the state keys,
// by this version (its MAC over the body's sum) or an earlier one (over
// all of it). Bytes equal in full to an envelope this Runtime sealed
// lately are not authenticated again (sealedStates); the kind and the
// header are checked either way. With the body it returns the digests of
// its blocks when it computed them (sandbox.State.Blocks).
func (rt *Runtime) open(b []byte, k sealKind, head any) ([]byte, [][32]byte, error) {
	if rt.sealed.has(b) {
		body, err := envelope.OpenSealed(b, k.magic, head)
		return body, nil, err
	}
	if envelope.HasMagic(b, k.legacy) {
		body, _, err := envelope.Open(b, k.legacy, rt.stateKeys, head)
		return body, nil, err
	}
	var blocks [][32]byte
	body, _, err := envelope.OpenSum(b, k.magic, rt.stateKeys, head, func(body []byte) [32]byte {
		var sum [32]byte
		sum, blocks = sandbox.SnapshotSumBlocks(body)
		return sum
	})
	if err != nil {
		return nil, nil, err
	}
	return body, blocks, nil
}

// sealedStates keeps copies of the last few states a Runtime sealed. A
// run's next step usually resumes the state its last step wrote, and
// bytes equal in full to a copy of one of them are authentic without
// computing their MAC again, which over a large state is most of what
// opening it costs (BENCHMARKS.md, "Copying what a step did not change").
type sealedStates struct {
	mu   sync.Mutex
	last [maxSealed][]byte
	next int
}

const (
	maxSealed = 2
	// maxSealedBytes is the largest state a copy is kept of.
	maxSealedBytes = 4 << 20
)

func (s *sealedStates) add(state []byte) {
	if len(state) > maxSealedBytes {
		return
	}
	c := bytes.Clone(state)
	s.mu.Lock()
	s.last[s.next] = c
	s.next = (s.next + 1) % maxSealed
	s.mu.Unlock()
}

// has reports whether state is byte for byte one of the copies. A copy
// is never written once kept (add replaces it), so the comparing is done
// outside the lock.
func (s *sealedStates) has(state []byte) bool {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	for _, c := range last {
		if len(c) == len(state) && bytes.Equal(c, state) {
			return true
		}
	}
	return false
}

var errPastDeadline = errors.New("codemode: the run's deadline passed")

// stateSizeError: a state of n bytes, over MaxStateBytes.
type stateSizeError struct{ n int }

func (e *stateSizeError) Error() string {
	return fmt.Sprintf("codemode: a state of %d bytes, over MaxStateBytes", e.n)
}

// sealFailure is how a run ends whose state sealState did not seal in
// time or in size; nil for any other outcome.
func (rt *Runtime) sealFailure(runCtx context.Context, ex *execution, err error) *sandbox.Failure {
	var size *stateSizeError
	switch {
	case err == nil:
		return nil
	case runCtx.Err() != nil:
		return &sandbox.Failure{Kind: sandbox.Abort, Message: "the run was cancelled by its caller"}
	case errors.Is(err, errPastDeadline):
		return sandbox.TimeoutFailure(ex.lim.Timeout)
	case errors.As(err, &size):
		return sandbox.StateLimitFailure(int64(size.n), rt.opts.MaxStateBytes)
	}
	return nil
}

// stateRoom is about how many bytes sealState adds to the sandbox's part
// of a state: the program (escaped as JSON), the audit and the held calls
// (counted in the sandbox's own room), and the MAC.
func stateRoom(code string) int { return 2*len(code) + 16<<10 + envelope.MACSize }

// openState authenticates a state (under StateKey or one of
// PreviousStateKeys) and checks it belongs to this engine build and tool
// tree. It returns the header and the sandbox's part.
func (rt *Runtime) openState(state []byte) (*stateHeader, sandbox.State, error) {
	if int64(len(state)) > rt.opts.MaxStateBytes {
		return nil, sandbox.State{}, fmt.Errorf("%w: it is %d bytes, over MaxStateBytes (%d)", ErrStateInvalid, len(state), rt.opts.MaxStateBytes)
	}
	var h stateHeader
	snap, blocks, err := rt.open(state, stateKind, &h)
	if err != nil {
		return nil, sandbox.State{}, fmt.Errorf("%w: %w", ErrStateInvalid, err)
	}
	if h.Engine != enginebin.SHA256 {
		return nil, sandbox.State{}, ErrStateEngine
	}
	if h.Tools != rt.treeSum() {
		return nil, sandbox.State{}, ErrStateTools
	}
	if h.Admitted != len(h.Calls) || h.Limits.MaxMemoryBytes <= 0 {
		return nil, sandbox.State{}, ErrStateInvalid
	}
	for _, e := range h.Held {
		if e.Index < 0 || e.Index >= len(h.Calls) {
			return nil, sandbox.State{}, ErrStateInvalid
		}
	}
	return &h, sandbox.State{Header: h.Sandbox, Snapshot: snap, Blocks: blocks}, nil
}

// ToolTreeSum is a digest of the Runtime's tool tree: every tool's path,
// schemas and checks, which a state records and Resume compares. Two
// Runtimes with the same sum (and ImageSum, StateKey and StateFormat)
// resume each other's states, so a host that runs programs on several
// machines can check it before it sends one a run.
func (rt *Runtime) ToolTreeSum() string { return rt.treeSum() }

// ImageSum identifies the engine image a state is taken against: the
// engine build, the sandbox's prelude and the way an instance boots, as
// this build of codemode makes them. It depends on no option and no tool
// (those are ToolTreeSum's). A state resumes only on a Runtime with the
// same ImageSum; one from another image is refused with ErrStateEngine,
// even when the engine build is the same. The first call makes the image
// when no run has yet (a few milliseconds); the answer is kept.
func (rt *Runtime) ImageSum() (string, error) {
	rt.imageOnce.Do(func() {
		s, ok := rt.sb.(guest.Suspender)
		if !ok {
			rt.imageErr = errNoSuspend
			return
		}
		rt.imageSum, rt.imageErr = s.ImageSum(uint64(DefaultMaxMemoryBytes), []sandbox.Namespace{toolsBinding(nil, nil)})
	})
	return rt.imageSum, rt.imageErr
}

// treeSum identifies the tool tree: every tool's path, schemas and
// validation settings. A state resumes only where it is the same.

func (rt *Runtime) treeSum() string {
	rt.sumOnce.Do(func() {
		hash := sha256.New()
		for _, e := range rt.tools {
			in, _ := json.Marshal(e.tool.Input)
			out, _ := json.Marshal(e.tool.Output)
			fmt.Fprintf(hash, "%q %s %s %t %t\n", e.path, in, out, e.tool.ValidateOutput, e.tool.SkipInputValidation)
		}
		rt.sum = hex.EncodeToString(hash.Sum(nil))
	})
	return rt.sum
}

func newRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// cancelledError marks a tool error that followed the end of the call's
// context (Runtime.RunPending): the audit records the call as cancelled.
type cancelledError struct{ err error }

func (e *cancelledError) Error() string { return e.err.Error() }
func (e *cancelledError) Unwrap() error { return e.err }

// outputError marks a tool result that failed the data or output-schema
// checks (Runtime.Call).
type outputError struct{ err error }

func (e *outputError) Error() string { return "invalid tool output: " + e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }

// ErrOutOfTime is the error of a CallResult for a call that was not made
// because its run was out of time (Runtime.RunPending makes it after
// PendingCall.Deadline); the audit records such a call as cancelled.
var ErrOutOfTime = errors.New("codemode: the run is out of time, so the call was not made")

// RunPending makes a pending call as a run would: the hooks see it, the
// tool gets the program's input and a context that CallFrom reads, and the
// output is checked. The result is ready for Resume. ctx bounds the tool,
// which may take as long as the host allows: a suspended run holds nothing
// while it waits. When the call has a Deadline, RunPending makes no call
// after it (the result's Err is ErrOutOfTime) and ends the tool's context
// then.
func (rt *Runtime) RunPending(ctx context.Context, call PendingCall) CallResult {
	res := CallResult{Index: call.Index}
	if !call.Deadline.IsZero() {
		if !time.Now().Before(call.Deadline) {
			res.Err = ErrOutOfTime
			return res
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, call.Deadline)
		defer cancel()
	}
	if isTxTool(call.Path) {
		// An approved begin: Resume opens the transaction.
		res.Output = json.RawMessage(`{}`)
		return res
	}
	e := rt.index[pathKey(call.Path)]
	if e == nil {
		res.Err = fmt.Errorf("codemode: %s is not a tool of this Runtime", strings.Join(call.Path, "."))
		return res
	}
	c := call.Call
	c.Name, c.Annotations = e.name, e.tool.Annotations
	if len(bytes.TrimSpace(c.Input)) == 0 {
		c.Input = json.RawMessage("{}")
	}
	ctx = withCall(ctx, c)
	var span trace.Span
	if rt.tel != nil {
		ctx, span = rt.tel.startCall(ctx, c)
	}
	rt.hookStart(ctx, c)
	r := invoke(ctx, c, e.tool.Run, e.output)
	end := r.end
	res.Duration, res.Output = end.Duration, r.out
	switch end.Outcome {
	case OutcomeError:
		res.Err = end.Err
	case OutcomeCancelled:
		// As in a run: a call whose context ended first (its run's
		// deadline, or the host's cancellation) was cancelled.
		res.Err = &cancelledError{end.Err}
	case OutcomeInvalidOutput:
		res.Err = &outputError{r.invalid}
	}
	rt.hookEnd(ctx, end)
	if rt.tel != nil {
		rt.tel.endCall(ctx, span, end, res.Output)
	}
	return res
}
