package codemode

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codemode-go/codemode/internal/guest"
	"github.com/codemode-go/codemode/internal/guest/js"
	"github.com/codemode-go/codemode/internal/sandbox"
)

// execution is the state of one run: admission, the audit and the
// concurrency queue.
type execution struct {
	rt *Runtime
	// began is when the run started (its first step, for a resumed
	// run): the calls' StartMs count from it.
	began   time.Time
	limiter *fifo
	src     *source
	lim     limits
	// hold makes admitted calls of the host's tools wait for Resume
	// instead of running (ExecuteSuspendable); held are those calls, by
	// their sandbox call ids.
	hold     bool
	held     map[int]heldCall
	deadline time.Time // zero without a Timeout
	// ctx is the run's; runID and session identify it to policies.
	ctx            context.Context
	runID, session string
	// grace ends CompensationGrace after the run does (endGrace starts
	// the clock), or once nothing needs it (dropGrace): it bounds waiting
	// for a transaction's calls.
	grace       context.Context
	endGrace    func()
	dropGrace   func()
	graceOnce   sync.Once
	graceCancel context.CancelFunc
	graceTimer  *time.Timer

	// tx is the open transaction, if any; rolledBack are the ids of
	// transactions rolled back (for held calls answered later). settling
	// counts rollbacks under way, which the Result waits for.
	tx         *transaction
	rolledBack []int
	settling   sync.WaitGroup
	txNote     string // what ending the run did to an open transaction

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

// start checks, compiles and runs a program; with hold, tool calls wait
// for Resume. early is set when the run ended before it reached the
// sandbox (it did not compile, or the sandbox refused it): it is the
// Result, with err.
func (rt *Runtime) start(ctx context.Context, code string, hold bool) (ex *execution, sr sandbox.Result, early *Result, err error) {
	// The run's time starts now: checking and compiling count against it.
	var deadline time.Time
	if rt.opts.Timeout > 0 {
		deadline = time.Now().Add(rt.opts.Timeout)
	}
	if hold {
		if _, ok := rt.sb.(guest.Suspender); !ok {
			return nil, sr, &Result{ToolCalls: []ToolCall{}}, errNoSuspend
		}
	}
	pragma, refused := precheck(code)
	if refused != nil {
		return nil, sr, refused, nil
	}
	// The program runs as written; only one that does not compile that
	// way (TypeScript, or a syntax error) goes through the language's
	// transform, whose syntax errors and positions are the ones reported.
	// Either way the sandbox compiles before it runs anything, so the
	// choice never runs a program twice.
	src := &source{code: code, prog: language.Wrap(code)}
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
	if sr, err = rt.sb.Run(ctx, req); err != nil {
		return nil, sr, &Result{Error: &Diagnostic{Kind: ExecutionFailure, Message: err.Error()}, ToolCalls: []ToolCall{}}, err
	}
	return ex, sr, nil, nil
}

// precheck refuses a program no parser may see (language.Check) and
// reads its pragma: the Result of a refused program, or its pragma.
func precheck(code string) (Pragma, *Result) {
	if e := language.Check(code); e != nil {
		return Pragma{}, &Result{Error: compileDiagnostic(e), ToolCalls: []ToolCall{}}
	}
	pragma, err := ParsePragma(code)
	if err != nil {
		return Pragma{}, &Result{Error: &Diagnostic{Kind: ParseError, Message: "the @exec pragma: " + err.Error(),
			Location: &Location{Line: pragmaLine(code), Column: 1}}, ToolCalls: []ToolCall{}}
	}
	return pragma, nil
}

func (rt *Runtime) newExecution(ctx context.Context, src *source, lim limits, hold bool) *execution {
	ex := &execution{rt: rt, limiter: newFIFO(rt.opts.MaxConcurrency), src: src, lim: lim, hold: hold,
		ctx: ctx, session: sessionOf(ctx), began: time.Now()}
	if hold {
		ex.held = map[int]heldCall{}
	}
	ex.grace, ex.graceCancel = context.WithCancel(context.WithoutCancel(ctx))
	ex.endGrace = func() {
		ex.graceOnce.Do(func() {
			t := time.AfterFunc(rt.opts.CompensationGrace, ex.graceCancel)
			ex.mu.Lock()
			ex.graceTimer = t
			ex.mu.Unlock()
		})
	}
	ex.dropGrace = func() {
		ex.graceCancel()
		ex.mu.Lock()
		if ex.graceTimer != nil {
			ex.graceTimer.Stop()
		}
		ex.mu.Unlock()
	}
	ex.runID = newRunID()
	return ex
}

// toolsBinding is the tools namespace of a run's request. Its name and
// error class, all an image depends on, are the same in every run.
func toolsBinding(members [][]string, admit func(sandbox.Call) (sandbox.Work, error)) sandbox.Namespace {
	return sandbox.Namespace{
		Name:       "tools",
		Members:    members,
		Admit:      admit,
		ErrorClass: &sandbox.ErrorClass{Name: "ToolError", Member: toolErrorMember, DataKind: string(InvalidDataValue)},
	}
}

// request is the sandbox request of the execution's run, but for the
// program.
func (ex *execution) request(deadline time.Time) sandbox.Request {
	req := sandbox.Request{
		Bindings:    []sandbox.Namespace{toolsBinding(ex.rt.paths, ex.admit)},
		Timeout:     ex.lim.Timeout,
		Deadline:    deadline,
		MemoryBytes: uint64(ex.lim.MaxMemoryBytes),
		Suspend:     ex.hold,
	}
	if ex.hold {
		req.MaxStateBytes, req.StateRoom = ex.rt.opts.MaxStateBytes, stateRoom(ex.src.code)
	}
	if f := logListener(ex.ctx); f != nil {
		req.OnLog = func(l sandbox.Log) { f(l.Text) }
	}
	if b, limited := outputBudget(ex.lim.MaxOutputBytes); limited {
		// One byte over the budget tells the two cases apart; the cut
		// itself happens in applyBudget.
		req.MaxOutputBytes = b + 1
		req.MaxLogBytes = b + 1
		if ex.rt.opts.RichContent {
			// Content leaves the value before the budget applies: the
			// value may hold it in base64, and the JSON around it.
			req.MaxOutputBytes += base64.StdEncoding.EncodedLen(ex.rt.opts.MaxContentBytes) + 64<<10
		}
	}
	return req
}

// finish turns the sandbox's result of a run that ended into the Result.
func (rt *Runtime) finish(ctx context.Context, ex *execution, sr sandbox.Result) (Result, error) {
	res := ex.result(sr)
	if sr.Failure != nil && sr.Failure.Kind == sandbox.Abort {
		// An interruption, not a failure of the program's: no diagnostic
		// a host could pass on to the model as one, unless undoing a
		// transaction needs reporting.
		res.Error = nil
		if ex.txNote != "" {
			res.Error = &Diagnostic{Kind: ExecutionFailure, Message: "the run was interrupted; " + ex.txNote}
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		return res, context.Canceled
	}
	return res, nil
}

// language is the front end of the language programs are written in;
// rt.sb runs what it prepares.
var language guest.Language = js.Language{}

// errNoSuspend: the Runtime's runner cannot suspend runs.
var errNoSuspend = fmt.Errorf("codemode: this engine cannot suspend runs: %w", errors.ErrUnsupported)

// source is a program on its way into the sandbox.
type source struct {
	code string
	// prog is what the sandbox compiles: the program as written, or the
	// transform's output once the fallback has run. Nil when the program
	// must be transformed first (see guest.Language.Wrap).
	prog *guest.Program
	// diag is the transform's diagnosis of a program that does not
	// compile.
	diag *Diagnostic
	// declined is the suggestion for a program that did not compile as
	// written and that the transform declined (too large for it).
	declined string
	// repl marks a REPL cell: a script, not a function body.
	repl bool
	// transformed marks a resumed program that ran as the transform's
	// output; prog is nil until recompile makes it again (only a
	// failure's location needs it).
	transformed bool
}

// recompile makes prog again for a resumed program that ran as the
// transform's output. The transform's output for a program is always the
// same.
func (s *source) recompile() {
	if s.prog != nil || !s.transformed {
		return
	}
	if p, err := language.Transform(context.Background(), s.code, false); err == nil {
		s.prog = p
	}
}

// fallback is the sandbox's Request.Fallback: the language's transform
// of the program, under the run's context.
func (s *source) fallback(ctx context.Context) (string, bool) {
	var p *guest.Program
	var err error
	if s.repl {
		p, err = language.TransformScript(ctx, s.code)
	} else {
		p, err = language.Transform(ctx, s.code, s.prog != nil)
	}
	var declined *guest.Declined
	switch {
	case errors.As(err, &declined):
		s.declined = declined.Suggestion
	case err != nil:
		if ctx.Err() == nil {
			s.diag = compileDiagnostic(err)
		}
	default:
		s.prog = p
		return p.Script, true
	}
	return "", false
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

// finished retires a call from the pending counts.
func (ex *execution) finished(inputBytes int) {
	ex.mu.Lock()
	ex.pending--
	ex.pendingBytes -= inputBytes
	ex.mu.Unlock()
}

// result builds the model-facing Result from the sandbox's. The run has
// ended (every call's context is done); it waits for the started calls'
// ends to be reported.
func (ex *execution) result(sr sandbox.Result) Result {
	ex.mu.Lock()
	ex.over = true
	ex.mu.Unlock()
	ex.endGrace()
	ex.ends.Wait()
	ex.settling.Wait() // a rollback under way finishes within the grace
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
	ex.dropGrace()
	logs := make([]string, len(sr.Logs))
	for i, l := range sr.Logs {
		logs[i] = l.Text
	}
	valueBytes := sr.ValueBytes
	if res.OK && ex.rt.opts.RichContent && len(res.Value) == valueBytes {
		// The whole value arrived (a cut one is not JSON): take its
		// content out before the output budget applies to the rest.
		var omitted int
		res.Value, res.Content, omitted = takeContent(res.Value, ex.rt.opts.MaxContentBytes)
		valueBytes = len(res.Value)
		res.Truncated = res.Truncated || omitted > 0
	}
	applyBudget(ex.lim.MaxOutputBytes, &res, valueBytes, logs, sr.LogsDropped, "")
	return res
}

// applyBudget enforces MaxOutputBytes: the value first, then log lines
// from the start while they fit, then one marker line. by names the limit
// in the markers: "" for the output limit, else what set the budget (the
// model reads the markers, and raises what they name).
func applyBudget(max int, res *Result, valueBytes int, logs []string, dropped int, by string) {
	budget, limited := outputBudget(max)
	over := func(n int) string { return fmt.Sprintf("over the %d-byte output limit", n) }
	cutBy := "the output limit"
	if by != "" {
		over = func(n int) string { return fmt.Sprintf("over the %d bytes %s allows", n, by) }
		cutBy = by
	}
	if d := res.Error; d != nil && limited && len(d.Message) > budget {
		// A failure has no value; its message, which may hold anything the
		// program threw (or a tool path it made up), is held to the
		// budget a value would have. The logs keep their own share, as the
		// contract says a failure's message is not cut to make room for
		// them.
		d.Message = cutUTF8(d.Message, budget) + fmt.Sprintf("… [truncated: the message is %d bytes, %s]", len(d.Message), over(budget))
		res.Truncated = true
	}
	if res.OK && limited && valueBytes > budget {
		s := cutUTF8(string(res.Value), budget) + fmt.Sprintf("… [truncated: the result is %d bytes of JSON, %s; return less]", valueBytes, over(budget))
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
		kept = append(kept, fmt.Sprintf("[%d more log lines cut by %s]", cutLines, cutBy))
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
		d.Kind, d.Cause = ExecutionFailure, CauseHost
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
		d.Kind, d.Cause = ExecutionFailure, CauseEngine
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
			if ex.src.declined != "" {
				d.Suggestions = []string{ex.src.declined}
			} else if ex.src.repl && isTopLevelReturn(f.Message) {
				d.Suggestions = []string{replReturn}
			} else {
				// The front end parsed the program; what only the engine
				// refuses is almost always a regular expression literal,
				// whose pattern the front end does not check.
				d.Suggestions = []string{"Check the program's regular expression literals (/.../): " + regexpHint}
			}
		case strings.HasPrefix(f.Message, "could not load module"):
			// import(): the engine's loader refuses every module. The
			// kind stays ExecutionFailure, the awaited import rejecting
			// at run time, as the conformance contract has it.
			d.Message = "import() is not supported: a program cannot load modules (" + f.Message + "); call the tools object instead"
			locate()
			if d.Location == nil {
				// The loader's error has no position: the first import( in
				// the source is the likely one.
				if loc := dynamicImport.FindStringIndex(ex.src.code); loc != nil {
					before := ex.src.code[:loc[0]]
					line := strings.Count(before, "\n") + 1
					col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
					d.Location = &Location{Line: line, Column: col}
				}
			}
		default:
			if f.Name != "" {
				d.Message = f.Name + ": " + f.Message
			} else {
				d.Message = "uncaught exception: " + f.Message
			}
			locate()
			if f.Name == "SyntaxError" {
				// Thrown while the program ran: text it parsed.
				d.Suggestions = []string{"A SyntaxError while the program runs comes from parsing text: new RegExp(pattern) with an invalid pattern (" + regexpHint + "), or JSON.parse of text that is not JSON. Check the text, or catch the error."}
			}
		}
		if d.Kind == ExecutionFailure {
			d.Cause = CauseProgram
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

// jsPath renders a tool path as program code, the call site a program
// writes: tools.ns.tool or tools.ns["odd-name"] in JavaScript.
func jsPath(path []string) string { return language.CallSite(path) }

// regexpHint lists what makes a regular expression's pattern invalid.
const regexpHint = "a parenthesis or bracket left open, a quantifier (*, +, ?, {n}) with nothing before it to repeat, a range written backwards ([z-a]), or an escape the u flag does not allow; escape a literal ( [ * + ? { with a backslash"

var dynamicImport = regexp.MustCompile(`\bimport\s*\(`)

// sinceStart is t in whole milliseconds from the start of the run.
func (ex *execution) sinceStart(t time.Time) int64 { return max(t.Sub(ex.began).Milliseconds(), 0) }
