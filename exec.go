package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codemode-go/codemode/internal/sandbox"
	"github.com/codemode-go/codemode/internal/tsgen"
	"github.com/codemode-go/codemode/internal/typescript"
	"github.com/google/jsonschema-go/jsonschema"
	"go.opentelemetry.io/otel/trace"
)

// execution is the state of one run: admission, the audit and the
// concurrency queue.
type execution struct {
	rt      *Runtime
	limiter *fifo
	src     *source
	lim     limits
	// hold makes admitted calls of the host's tools wait for Resume
	// instead of running (ExecuteSuspendable); held maps their sandbox
	// call ids to their audit index.
	tx       *transaction // the open transaction, if any
	hold     bool
	held     map[int]int
	asks     map[int]string // by audit index: the question of a held call
	deadline time.Time      // zero without a Timeout
	// ctx is the run's; runID and session identify it to policies.
	ctx            context.Context
	runID, session string

	mu       sync.Mutex
	calls    []ToolCall
	admitted int
	frozen   bool // the Result was taken; late admissions are not audited
	// pending counts the admitted calls not yet finished (running or
	// waiting for a slot), and pendingBytes their inputs.
	pending, pendingBytes int
	// over is set when the run has ended: a call that had not started by
	// then never starts. ends counts the started calls whose end is not
	// reported yet; Execute waits for it, so no hook runs after Execute
	// returns.
	over bool
	ends sync.WaitGroup
}

// maxPendingCalls bounds the calls of one run that are admitted and not
// finished. Each holds a goroutine and its input until it ends; without a
// bound, `for (;;) tools.x({})` queued calls until the host ran out of
// memory. Inputs waiting at once are bounded by the run's memory limit.
const maxPendingCalls = 10_000

const toolErrorMember = "tool"

// limits are the limits a run keeps from start to end (a resumed run
// keeps those it started with).
type limits struct {
	Timeout        time.Duration `json:"timeout,omitempty"`
	MaxToolCalls   int           `json:"maxToolCalls,omitempty"`
	MaxOutputBytes int           `json:"maxOutputBytes,omitempty"`
	MaxMemoryBytes int64         `json:"maxMemoryBytes"`
	// CountAway: time spent suspended counts against Timeout.
	CountAway bool `json:"countAway,omitempty"`
}

func (rt *Runtime) limits() limits {
	o := &rt.opts
	return limits{Timeout: o.Timeout, MaxToolCalls: o.MaxToolCalls, MaxOutputBytes: o.MaxOutputBytes,
		MaxMemoryBytes: o.MaxMemoryBytes, CountAway: o.TimeoutIncludesSuspended}
}

func (rt *Runtime) execute(ctx context.Context, code string, onLog func(string)) (Result, error) {
	ex, sr, early, err := rt.start(ctx, code, false, onLog)
	if early != nil {
		return *early, err
	}
	return rt.finish(ctx, ex, sr)
}

// start checks, compiles and runs a program; with hold, tool calls wait
// for Resume. early is set when the run ended before it reached the
// sandbox (it did not compile, or the sandbox refused it): it is the
// Result, with err.
func (rt *Runtime) start(ctx context.Context, code string, hold bool, onLog func(string)) (ex *execution, sr sandbox.Result, early *Result, err error) {
	// The run's time starts now: checking and compiling count against it.
	var deadline time.Time
	if rt.opts.Timeout > 0 {
		deadline = time.Now().Add(rt.opts.Timeout)
	}
	if e := typescript.Check(code); e != nil {
		return nil, sr, &Result{Error: compileDiagnostic(code, e), ToolCalls: []ToolCall{}}, nil
	}
	pragma, perr := ParsePragma(code)
	if perr != nil {
		return nil, sr, &Result{Error: &Diagnostic{Kind: ParseError, Message: "the @exec pragma: " + perr.Error(),
			Location: &Location{Line: pragmaLine(code), Column: 1}}, ToolCalls: []ToolCall{}}, nil
	}
	// Plain JavaScript runs as written; only a program that does not
	// compile that way (TypeScript, or a syntax error) goes through
	// esbuild, whose syntax errors and positions are the ones reported.
	// Either way the sandbox compiles before it runs anything, so the
	// choice never runs a program twice.
	src := &source{code: code, prog: typescript.Wrap(code)}
	program := ""
	if src.prog != nil {
		program = src.prog.Script
	}
	lim := rt.limits()
	if n := pragma.OutputBytes; n > 0 && (lim.MaxOutputBytes == 0 || n < lim.MaxOutputBytes) {
		lim.MaxOutputBytes = n // a program may lower its budget, never raise it
	}
	ex = rt.newExecution(ctx, src, lim, hold)
	ex.deadline = deadline
	req := ex.request(deadline)
	req.Program, req.Fallback = program, src.fallback
	if onLog != nil {
		req.OnLog = func(l sandbox.Log) { onLog(l.Text) }
	}
	if sr, err = rt.sb.Run(ctx, req); err != nil {
		return nil, sr, &Result{Error: &Diagnostic{Kind: ExecutionFailure, Message: err.Error()}, ToolCalls: []ToolCall{}}, err
	}
	return ex, sr, nil, nil
}

func (rt *Runtime) newExecution(ctx context.Context, src *source, lim limits, hold bool) *execution {
	ex := &execution{rt: rt, limiter: newFIFO(rt.opts.MaxConcurrency), src: src, lim: lim, hold: hold,
		ctx: ctx, session: sessionOf(ctx)}
	if hold {
		ex.held, ex.asks = map[int]int{}, map[int]string{}
	}
	if hold || rt.opts.Policy != nil {
		ex.runID = newRunID()
	}
	return ex
}

// request is the sandbox request of the execution's run, but for the
// program.
func (ex *execution) request(deadline time.Time) sandbox.Request {
	req := sandbox.Request{
		Bindings: []sandbox.Namespace{{
			Name:       "tools",
			Members:    ex.rt.paths,
			Admit:      ex.admit,
			ErrorClass: &sandbox.ErrorClass{Name: "ToolError", Member: toolErrorMember, DataKind: string(InvalidDataValue)},
		}},
		Timeout:     ex.lim.Timeout,
		Deadline:    deadline,
		MemoryBytes: uint64(ex.lim.MaxMemoryBytes),
		Suspend:     ex.hold,
	}
	if ex.hold {
		req.MaxStateBytes, req.StateRoom = ex.rt.opts.MaxStateBytes, stateRoom(ex.src.code)
	}
	if b, limited := outputBudget(ex.lim.MaxOutputBytes); limited {
		// One byte over the budget tells the two cases apart; the cut
		// itself happens in applyBudget.
		req.MaxOutputBytes = b + 1
		req.MaxLogBytes = b + 1
	}
	return req
}

// finish turns the sandbox's result of a run that ended into the Result.
func (rt *Runtime) finish(ctx context.Context, ex *execution, sr sandbox.Result) (Result, error) {
	res := ex.result(sr)
	if sr.Failure != nil && sr.Failure.Kind == sandbox.Abort {
		// An interruption, not a failure of the program's: no diagnostic
		// a host could pass on to the model as one.
		res.Error = nil
		if err := ctx.Err(); err != nil {
			return res, err
		}
		return res, context.Canceled
	}
	return res, nil
}

// source is a program on its way into the sandbox.
type source struct {
	code string
	// prog is what the sandbox compiles: the program as written, or
	// esbuild's output once the fallback has run. Nil when the program
	// must go through esbuild first (see typescript.Wrap).
	prog *typescript.Program
	// diag is esbuild's diagnosis of a program that does not compile.
	diag *Diagnostic
	// tooBig marks a program that did not compile as JavaScript and is
	// too large for esbuild.
	tooBig bool
	// transformed marks a resumed program that ran as esbuild's output;
	// prog is nil until recompile makes it again (only a failure's
	// location needs it).
	transformed bool
}

// recompile makes prog again for a resumed program that ran as esbuild's
// output. esbuild's output for a program is always the same.
func (s *source) recompile() {
	if s.prog != nil || !s.transformed {
		return
	}
	if p, err := typescript.Compile(context.Background(), s.code); err == nil {
		s.prog = p
	}
}

// fallback is the sandbox's Request.Fallback: esbuild's transform of the
// program, under the run's context.
func (s *source) fallback(ctx context.Context) (string, bool) {
	if len(s.code) > typescript.MaxTranspileBytes && s.prog != nil {
		s.tooBig = true
		return "", false
	}
	p, err := typescript.Compile(ctx, s.code)
	if err != nil {
		if ctx.Err() == nil {
			s.diag = compileDiagnostic(s.code, err)
		}
		return "", false
	}
	s.prog = p
	return p.Script, true
}

func outputBudget(max int) (int, bool) {
	switch b := max; {
	case b == 0:
		return 0, false
	case b < 0:
		return 0, true
	default:
		return b, true
	}
}

// admit is called by the sandbox, in call order, for every tool call.
func (ex *execution) admit(c sandbox.Call) (sandbox.Work, error) {
	var entry *toolEntry
	builtin := len(c.Path) == 2 && c.Path[0] == SearchNamespace && ex.rt.builtin(c.Path[1])
	name := ""
	if builtin {
		name = SearchNamespace + "." + c.Path[1]
	} else {
		key := c.Key
		if key == "" {
			key = pathKey(c.Path)
		}
		entry = ex.rt.index[key]
		if entry == nil {
			return nil, &sandbox.CallError{Kind: string(UnknownTool), Message: fmt.Sprintf("%s is not a tool", jsPath(c.Path))}
		}
		name = entry.name
	}
	ex.mu.Lock()
	limit := ex.lim.MaxToolCalls
	if limit < 0 || (limit > 0 && ex.admitted >= limit) {
		ex.mu.Unlock()
		n := limit
		if n < 0 {
			n = 0
		}
		return nil, &sandbox.CallError{Kind: string(ToolCallLimitExceeded),
			Message: fmt.Sprintf("the run may make at most %d tool calls; %s was not called", n, jsPath(c.Path))}
	}
	ex.mu.Unlock()

	var run func(ctx context.Context, input json.RawMessage) (any, error)
	var output *jsonschema.Resolved
	switch {
	case builtin && c.Path[1] == "search":
		if err := validateSearch(c.Input); err != nil {
			return nil, &sandbox.CallError{Kind: string(InvalidToolInput), Message: "input for " + jsPath(c.Path) + " is invalid: " + err.Error()}
		}
		run = ex.rt.searchTool
	case builtin && slices.Contains(txTools, c.Path[1]):
		if c.Path[1] == "begin" {
			if _, err := ex.rt.parseTouches(c.Input); err != nil {
				return nil, &sandbox.CallError{Kind: string(InvalidToolInput), Message: "input for " + jsPath(c.Path) + " is invalid: " + err.Error()}
			}
		}
		// run is made below, once the call has its index.
	case builtin:
		run = ex.rt.stateTool(c.Path[1], ex.session)
	default:
		if entry.resolved != nil {
			var v any
			if err := json.Unmarshal(c.Input, &v); err != nil {
				return nil, &sandbox.CallError{Kind: string(InvalidToolInput), Message: "input for " + jsPath(c.Path) + " is not JSON"}
			}
			if err := entry.resolved.Validate(v); err != nil {
				return nil, &sandbox.CallError{Kind: string(InvalidToolInput), Message: "input for " + jsPath(c.Path) + " is invalid: " + err.Error()}
			}
		}
		run, output = entry.tool.Run, entry.output
	}

	ex.mu.Lock()
	if ex.pending >= maxPendingCalls || int64(ex.pendingBytes+len(c.Input)) > ex.lim.MaxMemoryBytes {
		n, b := ex.pending, ex.pendingBytes
		ex.mu.Unlock()
		return nil, &sandbox.CallError{Kind: string(ToolCallLimitExceeded),
			Message: fmt.Sprintf("%s was not called: %d calls with %d bytes of input are already waiting or running, and a run may have at most %d calls and %d bytes of input under way; await calls before starting more",
				jsPath(c.Path), n, b, maxPendingCalls, ex.lim.MaxMemoryBytes)}
	}
	ex.pending++
	ex.pendingBytes += len(c.Input)
	index := ex.admitted
	ex.admitted++
	if !ex.frozen {
		ex.calls = append(ex.calls, ToolCall{Name: name})
	}
	ex.mu.Unlock()
	input := c.Input
	d := Decision{Verdict: Allow}
	var req CallRequest
	tx := isTxTool(c.Path)
	if tx {
		run = ex.txTool(c.Path[1], index)
	}
	inTx := false
	if !builtin {
		var err error
		if inTx, err = ex.txCheck(name, c.Path); err != nil {
			ex.deny(index, len(input))
			return nil, &sandbox.CallError{Kind: string(ToolFailure), Message: err.Error()}
		}
	}
	if !builtin || tx && c.Path[1] == "begin" {
		req = CallRequest{Name: name, Path: c.Path, Input: input, Index: index,
			RunID: ex.runID, Session: ex.session, Source: CallSource}
		if entry != nil {
			req.Annotations = entry.tool.Annotations
		}
		switch {
		case inTx && ex.rt.opts.Policy != nil:
			// The policy decided about the transaction's touched set.
		case ex.rt.opts.Policy != nil:
			d = ex.rt.decide(ex.ctx, req)
		case ex.hold && !tx:
			d.Verdict = Ask // without a policy, every call of a suspendable run waits
		}
	}
	switch {
	case d.Verdict == Deny:
		ex.deny(index, len(input))
		return nil, deniedError(c.Path, d.Reason)
	case d.Verdict == Ask && ex.hold:
		ex.mu.Lock()
		ex.held[c.ID] = index
		ex.asks[index] = d.Reason
		ex.mu.Unlock()
		return nil, sandbox.ErrHold
	case d.Verdict == Ask:
		// Options.Approve decides on the call's goroutine, so a person may
		// take their time (within the run's); the call takes its place in
		// the concurrency queue once approved.
		return func(ctx context.Context) (json.RawMessage, error) {
			defer ex.finished(len(input))
			if a := ex.rt.approve(ctx, req, d.Reason); a.Verdict != Allow {
				ex.deny(index, 0)
				return nil, deniedError(c.Path, a.Reason)
			}
			out, err := ex.perform(ctx, ex.limiter.enqueue(), index, name, input, run, output)
			if err == nil && !builtin {
				ex.txRecord(index, name, c.Path, input, out)
			}
			return out, err
		}, nil
	}
	slot := ex.limiter.enqueue()
	return func(ctx context.Context) (json.RawMessage, error) {
		defer ex.finished(len(input))
		out, err := ex.perform(ctx, slot, index, name, input, run, output)
		if err == nil && !builtin {
			ex.txRecord(index, name, c.Path, input, out)
		}
		return out, err
	}, nil
}

// builtin reports whether name is a built-in tool of the Runtime.
func (rt *Runtime) builtin(name string) bool {
	return name == "search" || slices.Contains(txTools, name) || rt.opts.Store != nil && slices.Contains(stateTools, name)
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

// deniedError is what the program sees of a denied call.
func deniedError(path []string, reason string) error {
	msg := jsPath(path) + " was denied"
	if reason != "" {
		msg += ": " + reason
	}
	return &sandbox.CallError{Kind: string(ToolFailure), Message: msg}
}

// decide asks the policy, turning a panic into a denial.
func (rt *Runtime) decide(ctx context.Context, req CallRequest) (d Decision) {
	defer func() {
		if p := recover(); p != nil {
			d = Decision{Verdict: Deny, Reason: "the host's policy failed"}
		}
	}()
	d = rt.opts.Policy(ctx, req)
	if d.Verdict != Allow && d.Verdict != Deny && d.Verdict != Ask {
		d = Decision{Verdict: Deny, Reason: "the host's policy gave no verdict"}
	}
	return d
}

// approve asks Options.Approve about a call the policy asked for; without
// it, nobody can approve, and the call is denied.
func (rt *Runtime) approve(ctx context.Context, req CallRequest, question string) (d Decision) {
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

// finished retires a call from the pending counts.
func (ex *execution) finished(inputBytes int) {
	ex.mu.Lock()
	ex.pending--
	ex.pendingBytes -= inputBytes
	ex.mu.Unlock()
}

// perform runs an admitted call once it has a concurrency slot.
func (ex *execution) perform(ctx context.Context, slot *ticket, index int, name string, input json.RawMessage,
	run func(context.Context, json.RawMessage) (any, error), output *jsonschema.Resolved) (json.RawMessage, error) {
	failed := &sandbox.CallError{Kind: string(ToolFailure), Message: "Tool execution failed"}
	if err := slot.wait(ctx); err != nil {
		return nil, failed // it never started: nothing to report
	}
	defer ex.limiter.release()
	c := ex.begin(ctx, ToolCallStart{Index: index, Name: name, Input: input})
	if c == nil {
		return nil, failed // the run ended first
	}
	end := ToolCallEnd{Index: index, Name: name, Input: input}
	v, err := callTool(c.ctx, run, input)
	if err != nil {
		msg := publicMessage(err)
		end.Outcome, end.Message, end.Err = OutcomeError, msg, err
		if ctx.Err() != nil {
			end.Outcome = OutcomeCancelled
		}
		c.end(end, nil)
		return nil, &sandbox.CallError{Kind: string(ToolFailure), Message: msg}
	}
	out, err := toolOutput(v)
	if err == nil && output != nil {
		err = validateOutput(output, out)
	}
	if err != nil {
		end.Outcome, end.Message = OutcomeInvalidOutput, err.Error()
		c.end(end, nil)
		return nil, &sandbox.CallError{Kind: string(InvalidToolOutput), Message: jsPath(strings.Split(name, ".")) + " returned " + err.Error()}
	}
	end.Outcome = OutcomeOK
	c.end(end, out)
	return out, nil
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
// context has (then it must not run, and begin returns nil).
func (ex *execution) begin(ctx context.Context, s ToolCallStart) *running {
	ex.mu.Lock()
	if ex.over || ctx.Err() != nil {
		ex.mu.Unlock()
		return nil
	}
	ex.ends.Add(1)
	ex.mu.Unlock()
	c := &running{ex: ex, ctx: ctx}
	if t := ex.rt.tel; t != nil {
		c.ctx, c.span = t.startCall(ctx, s)
	}
	ex.rt.hookStart(c.ctx, s)
	c.start = time.Now()
	c.stop = context.AfterFunc(ctx, func() {
		c.report(ToolCallEnd{Index: s.Index, Name: s.Name, Input: s.Input, Outcome: OutcomeCancelled}, nil)
	})
	return c
}

// end reports the tool's own outcome, unless the cancellation was
// reported first; out is the tool's output when it succeeded.
func (c *running) end(e ToolCallEnd, out json.RawMessage) {
	c.stop()
	c.report(e, out)
}

func (c *running) report(e ToolCallEnd, out json.RawMessage) {
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

func (rt *Runtime) hookStart(ctx context.Context, s ToolCallStart) {
	if h := rt.opts.OnToolCallStart; h != nil {
		func() {
			defer func() { _ = recover() }()
			h(ctx, s)
		}()
	}
}

func (rt *Runtime) hookEnd(ctx context.Context, e ToolCallEnd) {
	if h := rt.opts.OnToolCallEnd; h != nil {
		func() {
			defer func() { _ = recover() }()
			h(ctx, e)
		}()
	}
}

// result builds the model-facing Result from the sandbox's. The run has
// ended (every call's context is done); it waits for the started calls'
// ends to be reported.
func (ex *execution) result(sr sandbox.Result) Result {
	ex.mu.Lock()
	ex.over = true
	ex.mu.Unlock()
	ex.ends.Wait()
	ex.mu.Lock()
	ex.frozen = true
	calls := append([]ToolCall{}, ex.calls...)
	ex.mu.Unlock()
	for i := range calls {
		if calls[i].Outcome == "" {
			calls[i].Outcome = OutcomeCancelled // admitted, and never started
		}
	}
	res := Result{ToolCalls: calls}
	f := sr.Failure
	if f == nil || f.Kind == sandbox.OutputLimit {
		res.OK = true
		res.Value = sr.Value
	} else {
		res.Error = ex.diagnose(f)
	}
	ex.endTx(&res)
	logs := make([]string, len(sr.Logs))
	for i, l := range sr.Logs {
		logs[i] = l.Text
	}
	applyBudget(ex.lim.MaxOutputBytes, &res, sr.ValueBytes, logs, sr.LogsDropped)
	return res
}

// applyBudget enforces MaxOutputBytes: the value first, then log lines
// from the start while they fit, then one marker line.
func applyBudget(max int, res *Result, valueBytes int, logs []string, dropped int) {
	budget, limited := outputBudget(max)
	if d := res.Error; d != nil && limited && len(d.Message) > budget {
		// A failure has no value; its message, which may hold anything the
		// program threw (or a tool path it made up), is held to the
		// budget a value would have. The logs keep their own share, as the
		// contract says a failure's message is not cut to make room for
		// them.
		d.Message = cutUTF8(d.Message, budget) + fmt.Sprintf("… [truncated: the message is %d bytes, over the %d-byte output limit]", len(d.Message), budget)
		res.Truncated = true
	}
	if res.OK && limited && valueBytes > budget {
		s := cutUTF8(string(res.Value), budget) + fmt.Sprintf("… [truncated: the result is %d bytes of JSON, over the %d-byte output limit; return less]", valueBytes, budget)
		res.Value, _ = json.Marshal(s)
		res.Truncated = true
		budget = 0
	} else if res.OK && limited {
		budget -= valueBytes
	}
	kept := logs
	if limited {
		kept = nil
		for _, l := range logs {
			if len(l)+1 > budget {
				break
			}
			budget -= len(l) + 1
			kept = append(kept, l)
		}
	}
	cutLines := len(logs) - len(kept) + dropped
	if cutLines > 0 {
		kept = append(kept, fmt.Sprintf("[%d more log lines cut by the output limit]", cutLines))
		res.Truncated = true
	}
	if len(kept) > 0 {
		res.Logs = kept
	}
}

// cutUTF8 returns s's first n bytes at most, cut at a character boundary.
func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// diagnose maps a sandbox failure to a Diagnostic.
func (ex *execution) diagnose(f *sandbox.Failure) *Diagnostic {
	d := &Diagnostic{Kind: ExecutionFailure, Message: f.Message}
	locate := func() {
		ex.src.recompile()
		if f.Line > 0 {
			if l, c, ok := ex.src.prog.Position(f.Line, f.Column); ok {
				d.Location = &Location{Line: l, Column: c}
			}
		}
	}
	switch f.Kind {
	case sandbox.Timeout:
		d.Kind = TimeoutExceeded
		d.Suggestions = []string{"Do less work per run: run independent tool calls in parallel with Promise.all, and fetch only what you need."}
	case sandbox.Abort:
		d.Kind = ExecutionFailure
	case sandbox.Memory:
		d.Kind = MemoryLimitExceeded
		d.Suggestions = []string{"Keep less data in memory: filter and aggregate as results arrive, and return only the fields needed."}
	case sandbox.StateLimit:
		d.Kind = MemoryLimitExceeded
		d.Suggestions = []string{"Keep less in memory before awaiting tool calls: a run that waits for a call is saved with everything it holds, so filter, aggregate or drop data before the await."}
	case sandbox.InvalidOutput:
		d.Kind = InvalidDataValue
		d.Suggestions = []string{"Return plain data: objects, arrays, strings, numbers, booleans and null."}
	case sandbox.WorkerExit:
		d.Kind = ExecutionFailure
	case sandbox.Exception:
		switch {
		case f.Deadlock:
			d.Suggestions = []string{"A promise the program awaits can never settle. Make sure every promise you create is resolved or rejected."}
		case callKinds[Kind(f.Code)]:
			d.Kind = Kind(f.Code)
			d.Suggestions = ex.suggestFor(d.Kind, f.Member)
			if f.Unawaited {
				d.Message = fmt.Sprintf("a tool call that was never awaited failed: %s", f.Message)
				d.Suggestions = append(d.Suggestions, "Await every tool call (or attach .catch) so its failure is handled.")
			}
			locate()
		case f.Syntax:
			if ex.src.diag != nil {
				return ex.src.diag
			}
			d.Kind = ParseError
			d.Message = f.Message
			locate()
			if ex.src.tooBig {
				d.Suggestions = []string{fmt.Sprintf("TypeScript syntax is accepted only in programs up to %d bytes; write larger programs as plain JavaScript.", typescript.MaxTranspileBytes)}
			}
		default:
			if f.Name != "" {
				d.Message = f.Name + ": " + f.Message
			} else {
				d.Message = "uncaught exception: " + f.Message
			}
			locate()
		}
	}
	return d
}

// suggestFor proposes fixes for tool-call failures.
func (ex *execution) suggestFor(k Kind, member string) []string {
	switch k {
	case UnknownTool:
		if near := ex.rt.nearTools(member, 3); len(near) > 0 {
			return []string{"Did you mean " + strings.Join(near, ", ") + "?",
				"Use tools.$codemode.search({ query }) to find tools."}
		}
		return []string{"Use tools.$codemode.search({ query }) to find tools, and call them by their exact path."}
	case InvalidToolInput:
		return []string{"Check the tool's signature (tools.$codemode.search with its exact path) and pass an input that matches it."}
	case ToolCallLimitExceeded:
		return []string{"Make fewer tool calls: batch work, or return partial results."}
	case InvalidDataValue:
		return []string{"Pass and return plain data: objects, arrays, strings, numbers, booleans and null; await promises first."}
	}
	return nil
}

// callKinds are the kinds a failed tool call carries into a Diagnostic.
// The others (TimeoutExceeded, ParseError, ...) come only from the run
// itself, never from a value the program threw.
var callKinds = map[Kind]bool{
	UnknownTool: true, InvalidToolInput: true, InvalidToolOutput: true, InvalidDataValue: true,
	ToolCallLimitExceeded: true, ToolFailure: true,
}

// pathKey identifies a path unambiguously (segments may contain dots).
func pathKey(path []string) string { return strings.Join(path, "\x00") }

// jsPath renders a tool path as program code: tools.ns.tool or
// tools.ns["odd-name"].
func jsPath(path []string) string { return tsgen.AccessPath(path) }
