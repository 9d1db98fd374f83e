package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codemode-go/codemode/internal/quickjs"
)

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("sandbox: closed")

// Run runs one program. Program failures are reported in Result.Failure;
// the error is non-nil only for an invalid request or a closed Sandbox.
func (s *Sandbox) Run(ctx context.Context, req Request) (Result, error) {
	if err := validate(&req); err != nil {
		return Result{}, err
	}
	if err := s.begin(); err != nil {
		return Result{}, err
	}
	defer s.runs.Done() // Run always waits for its worker, so this covers both
	// Guest code needs no watcher: the instance checks its own deadline at
	// every fuel tick (see quickjs.Instance.SetDeadline), and a
	// cancellation of the caller's context kills it through the AfterFunc
	// below. So the run executes on the caller's goroutine, with no
	// goroutine to start or wake.
	if req.From != nil {
		return s.runFrom(ctx, req)
	}
	r := s.newRun(ctx, req)
	stop := context.AfterFunc(ctx, func() { r.expire(Abort) })
	r.work(r.execute)
	stop()
	return r.result(), nil
}

// newRun makes the state of one run and its context: the deadline and the
// caller's cancellation reach call work and the run loop's waits through
// r.ctx.
func (s *Sandbox) newRun(ctx context.Context, req Request) *run {
	if req.MemoryBytes == 0 {
		req.MemoryBytes = DefaultMemoryBytes
	}
	if req.MaxLogBytes == 0 {
		req.MaxLogBytes = DefaultMaxLogBytes
	}
	r := &run{
		s:           s,
		req:         req,
		caller:      ctx,
		inflight:    map[int]context.CancelFunc{},
		held:        map[int]heldCall{},
		timers:      map[int]time.Time{},
		completions: make(chan completion, 16),
		stop:        make(chan struct{}),
		expired:     make(chan struct{}),
		rejected:    map[uint32]rejection{},
	}
	switch {
	case !req.Deadline.IsZero():
		r.deadline = req.Deadline
		r.ctx, r.cancel = context.WithDeadline(ctx, r.deadline)
	case req.Timeout > 0:
		r.deadline = time.Now().Add(req.Timeout)
		r.ctx, r.cancel = context.WithDeadline(ctx, r.deadline)
	default:
		r.ctx, r.cancel = context.WithCancel(ctx)
	}
	return r
}

// begin registers a run with the Sandbox; done must follow.
func (s *Sandbox) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.runs.Add(1)
	return nil
}

// completion is a finished call, posted by its goroutine.
type completion struct {
	id  int
	ns  int // namespace index
	out json.RawMessage
	err error
}

type rejection struct {
	promise, reason quickjs.Value
}

type run struct {
	s      *Sandbox
	req    Request
	caller context.Context
	ctx    context.Context // for call work
	cancel context.CancelFunc

	deadline time.Time
	pool     *pool // to tell once the instance is released; may be nil
	b        *booted
	in       *quickjs.Instance
	ctl      controls
	main     quickjs.Value

	inflight    map[int]context.CancelFunc
	held        map[int]heldCall // calls admitted with ErrHold, also in inflight
	early       []completion     // received by awaitQuick for another call
	paths       []callPath       // registered by the prelude (OP_PATH); a path's id is its index + 1
	pathBytes   int              // JSON bytes of the paths registered so far
	failure     string           // the {kind, message} of the last call decided at once as failed
	callSeq     int              // the last call's id
	timers      map[int]time.Time
	completions chan completion
	stop        chan struct{} // closed when the run ends: late completions are dropped
	expired     chan struct{} // closed by expire

	rejected map[uint32]rejection // unhandled rejections by promise identity
	settled  bool

	mu       sync.Mutex // guards the fields below
	expiry   FailureKind
	complete bool // work has recorded its outcome; a later expiry is moot
	res      Result
	logBytes int
	susp     *Suspension // set when the run suspended
}

type controls struct {
	obj                                                                                quickjs.Value
	install, settle, fire, cancelTimers, start, finish, describe, callID, site, retree quickjs.Value
}

// ctxExpiry classifies the end of r.ctx.
func (r *run) ctxExpiry() FailureKind {
	if r.caller.Err() == nil && !r.deadline.IsZero() && !time.Now().Before(r.deadline) {
		return Timeout
	}
	if r.caller.Err() != nil {
		return Abort
	}
	return Timeout
}

func (r *run) expire(kind FailureKind) {
	r.mu.Lock()
	if r.complete {
		r.mu.Unlock()
		return
	}
	if r.expiry == "" {
		r.expiry = kind
		close(r.expired)
	}
	in := r.in
	r.mu.Unlock()
	if in != nil {
		in.Kill()
	}
}

func (r *run) result() Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Logs = append([]Log(nil), r.res.Logs...)
	res.Suspended = r.susp
	if r.expiry != "" {
		res.Value = nil
		res.Failure = r.expiryFailure()
		res.Suspended = nil
	}
	return res
}

func (r *run) expiryFailure() *Failure {
	if r.expiry == Timeout {
		return TimeoutFailure(r.req.Timeout)
	}
	msg := "the run was cancelled by its caller"
	if err := r.caller.Err(); err != nil {
		msg += ": " + err.Error()
	}
	return &Failure{Kind: Abort, Message: msg}
}

// TimeoutFailure is the failure of a run that did not finish within
// timeout (Request.Timeout).
func TimeoutFailure(timeout time.Duration) *Failure {
	return &Failure{Kind: Timeout, Message: fmt.Sprintf("the program did not finish within %s", timeout)}
}

// work owns the engine instance for the whole run; start begins it (a
// new run, or a resumed one) and drives it to its end.
func (r *run) work(start func() *Failure) {
	f := start()
	if r.req.Keep {
		r.keep(f)
	}
	r.mu.Lock()
	if f != nil {
		r.res.Failure = f
		r.res.Value = nil
	}
	r.complete = true
	r.mu.Unlock()
	for _, c := range r.inflight {
		c()
	}
	close(r.stop)
	r.cancel()
	// An instance that can be reused is reset now (tens of microseconds),
	// so the next run finds it ready even on one processor. Releasing one
	// that cannot (unmapping its memory) is not on the caller's path;
	// Sandbox.Close still waits for it, through the engine's count of live
	// instances.
	if in := r.in; in != nil {
		r.freeRejections()
		p := r.pool
		if in.Reuse() {
			// (Kept for resumes when it grew: then the image may have no
			// instance left for new runs.)
			if p != nil {
				p.released()
			}
			return
		}
		go func() {
			in.Close()
			if p != nil {
				p.released()
			}
		}()
	}
}

func (r *run) execute() *Failure {
	b, p, err := r.s.acquire(r.req.MemoryBytes, bindingSpec(r.req.Bindings), r.req.Suspend || r.req.Keep)
	r.pool = p
	if err != nil {
		return &Failure{Kind: WorkerExit, Message: "the engine could not start: " + err.Error()}
	}
	return r.begin(b)
}

// begin runs the program in b's instance, fresh or a kept heap.
func (r *run) begin(b *booted) *Failure {
	r.bind(b)
	b.in.RestartClock()
	in := b.in
	code, f := r.load()
	if code == nil {
		return f
	}
	v, err := in.EvalBytecode(code)
	if err != nil {
		return r.engineFailure(err)
	}
	main, err := in.Call(r.ctl.start, r.ctl.obj, v)
	in.Free(v)
	if err != nil {
		return r.engineFailure(err)
	}
	r.main = main
	return r.loop()
}

// bind makes b the run's instance.
func (r *run) bind(b *booted) {
	in := b.in
	r.b, r.ctl = b, b.ctl
	in.SetHost(r.host)
	in.SetDeadline(r.deadline)
	r.mu.Lock()
	r.in = in
	expired := r.expiry != ""
	r.mu.Unlock()
	if expired {
		in.Kill()
	}
}

// load compiles the program, or Fallback's program when it does not
// compile. Compiling apart from running means a program that fails at run
// time with a SyntaxError (JSON.parse, or a throw of its own) is never
// taken for one that did not compile, and no program runs twice. It
// returns nil bytecode and the failure (nil when the run expired).
func (r *run) load() ([]byte, *Failure) {
	var syntax *Failure
	if r.req.Program != "" {
		code, f := r.compile(r.req.Program)
		if code != nil || f == nil || !f.Syntax || r.req.Fallback == nil {
			return code, f
		}
		syntax = f
	}
	if r.req.Fallback == nil {
		return nil, &Failure{Kind: Exception, Syntax: true, Name: "SyntaxError", Message: "the program is empty"}
	}
	alt, ok := r.req.Fallback(r.ctx)
	if r.ctx.Err() != nil {
		r.expire(r.ctxExpiry())
		return nil, nil
	}
	if !ok {
		if syntax == nil {
			syntax = &Failure{Kind: Exception, Syntax: true, Name: "SyntaxError", Message: "the program does not compile"}
		}
		return nil, syntax
	}
	return r.compile(alt)
}

// compile compiles a program to bytecode. Any exception while compiling
// (a SyntaxError, or the parser running out of stack on deep nesting) is
// a failure to compile.
func (r *run) compile(program string) ([]byte, *Failure) {
	flags := quickjs.EvalStrict
	if r.req.Script {
		flags |= quickjs.EvalAsync
	}
	code, err := r.in.Compile(program, programFile, flags, false)
	if err == nil {
		return code, nil
	}
	f := r.engineFailure(err)
	if f != nil && f.Kind == Exception {
		f.Syntax = true
		if f.Name != "SyntaxError" {
			f.Message = "the program is nested too deeply for the engine to compile (" + f.Name + ": " + f.Message + "): flatten it"
		}
	}
	return nil, f
}

// stackSize leaves a margin below the engine build's C stack (1 MiB, where
// recursion traps instead of throwing) for builtins that recurse natively.
const stackSize = 800 << 10

const programFile = "program.js"

// callValues calls a control function of the run's instance.
func (r *run) callValues(fn quickjs.Value, args ...quickjs.Value) (string, error) {
	return r.b.callValues(fn, args...)
}

// loop drives the program until its promise settles and every call it
// started has finished, then applies the end-of-run checks.
func (r *run) loop() *Failure {
	in := r.in
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := in.RunJobs(); err != nil {
			return r.engineFailure(err)
		}
		r.trackRejections()
		if !r.settled {
			switch in.PromiseState(r.main) {
			case 1:
				r.settled = true
				if f := r.settleValue(); f != nil {
					return f
				}
			case 2:
				r.settled = true
				reason, err := in.PromiseResult(r.main)
				if err != nil {
					return r.engineFailure(err)
				}
				f := r.describeThrown(reason)
				in.Free(reason)
				return f
			}
			if r.settled {
				if len(r.timers) > 0 {
					if _, err := r.callValues(r.ctl.cancelTimers); err != nil {
						return r.engineFailure(err)
					}
					clear(r.timers)
				}
				continue
			}
		}
		if r.settled && len(r.inflight) == 0 {
			return r.unawaitedFailure()
		}
		if !r.settled && len(r.inflight) == 0 && len(r.timers) == 0 {
			return &Failure{Kind: Exception, Deadlock: true, Name: "Error",
				Message: "the program is waiting for a promise that nothing can settle: no call or timer is pending"}
		}
		if len(r.early) > 0 {
			c := r.early[0]
			r.early = r.early[1:]
			if err := r.deliver(c); err != nil {
				return r.engineFailure(err)
			}
			continue
		}
		if len(r.held) > 0 && len(r.inflight) == len(r.held) {
			// Nothing is under way but held calls: fire the timers that are
			// due, then suspend.
			if next, ok := r.nextTimer(); ok && !next.After(time.Now()) {
				if err := r.fireDue(); err != nil {
					return r.engineFailure(err)
				}
				continue
			}
			return r.suspend()
		}
		var timerC <-chan time.Time
		if next, ok := r.nextTimer(); ok {
			d := time.Until(next)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			timerC = timer.C
		}
		select {
		case c := <-r.completions:
			if err := r.deliver(c); err != nil {
				return r.engineFailure(err)
			}
		case <-timerC:
			if err := r.fireDue(); err != nil {
				return r.engineFailure(err)
			}
		case <-r.expired:
			return nil // result() reports the expiry
		case <-r.ctx.Done():
			// The deadline or the caller's cancellation, seen before Run's
			// own timer: the run ends the same way.
			r.expire(r.ctxExpiry())
			return nil
		}
	}
}

// spinFor is how long starting a call waits for its answer (see
// awaitQuick). Most tools answer in microseconds; catching the answer
// while the call is still being started saves a second crossing into the
// engine and the wakeup of the run loop (most of a tool call's cost).
const spinFor = 25 * time.Microsecond

// pollTurns is how many times awaitQuick polls a handed call before it
// yields: a fraction of a microsecond (measured: 0.3 µs per call less
// than yielding at once).
const pollTurns = 32

// slowAfter is how many misses in a row stop awaitQuick from waiting on a
// call path.
const slowAfter = 3

func (r *run) nextTimer() (time.Time, bool) {
	var next time.Time
	ok := false
	for _, t := range r.timers {
		if !ok || t.Before(next) {
			next, ok = t, true
		}
	}
	return next, ok
}

func (r *run) fireDue() error {
	now := time.Now()
	// Fire in due order, one at a time, running jobs between callbacks.
	for {
		id, due := 0, time.Time{}
		for tid, t := range r.timers {
			if !t.After(now) && (id == 0 || t.Before(due) || (t.Equal(due) && tid < id)) {
				id, due = tid, t
			}
		}
		if id == 0 {
			return nil
		}
		delete(r.timers, id)
		idBox, err := r.in.NewNumber(float64(id))
		if err != nil {
			return err
		}
		_, err = r.callValues(r.ctl.fire, idBox)
		r.in.Free(idBox)
		if err != nil {
			var exc *quickjs.Exception
			if errors.As(err, &exc) {
				// A throwing timer callback is an uncaught exception, as in node.
				f := r.describeThrown(exc.Value)
				r.in.Free(exc.Value)
				return failureError{f}
			}
			return err
		}
		if err := r.in.RunJobs(); err != nil {
			return err
		}
	}
}

func (r *run) deliver(c completion) error {
	id, payload, ok := r.outcome(c)
	if !ok {
		return nil
	}
	idBox, err := r.in.NewNumber(float64(id))
	if err != nil {
		return err
	}
	defer r.in.Free(idBox)
	pBox, err := r.in.NewString(payload)
	if err != nil {
		return err
	}
	defer r.in.Free(pBox)
	_, err = r.callValues(r.ctl.settle, idBox, pBox)
	return err
}

// outcome retires a completed call and encodes it for the program: the
// call id (negated for a failure) and the result JSON (or {kind,
// message}). ok is false when the program must not see it: the call was
// cancelled, or it failed because the run is ending.
func (r *run) outcome(c completion) (id int, payload string, ok bool) {
	cancel, live := r.inflight[c.id]
	if !live {
		return 0, "", false // cancelled (lost a race)
	}
	if c.err != nil && r.ctx.Err() != nil {
		r.expire(r.ctxExpiry())
		return 0, "", false
	}
	cancel() // the work is done; release its context
	delete(r.inflight, c.id)
	if c.err != nil {
		ce := &CallError{Kind: "Error", Message: "the call failed"}
		errors.As(c.err, &ce)
		b, _ := json.Marshal(map[string]string{"kind": ce.Kind, "message": ce.Message})
		return -c.id, string(b), true
	}
	if err := CheckData(c.out, "the result"); err != nil {
		b, _ := json.Marshal(map[string]string{"kind": r.dataKind(c.ns), "message": err.Error()})
		return -c.id, string(b), true
	}
	return c.id, string(c.out), true
}

// settleValue serializes the fulfilled value.
func (r *run) settleValue() *Failure {
	in := r.in
	v, err := in.PromiseResult(r.main)
	if err != nil {
		return r.engineFailure(err)
	}
	if r.req.Script {
		// An async script's promise holds {value: completion}.
		inner, err := in.GetProp(v, "value")
		in.Free(v)
		if err != nil {
			return r.engineFailure(err)
		}
		v = inner
	}
	out, err := r.callValues(r.ctl.finish, v)
	in.Free(v)
	if err != nil {
		return r.engineFailure(err)
	}
	if len(out) == 0 {
		return &Failure{Kind: WorkerExit, Message: "the engine returned no result"}
	}
	if out[0] == '0' {
		var d described
		_ = json.Unmarshal([]byte(out[1:]), &d)
		return &Failure{Kind: InvalidOutput, Message: d.Message, Name: d.Name}
	}
	text := out[1:]
	// The prelude checked the value while serializing it; check the text
	// again here, where no program code can reach the checker.
	if err := CheckData([]byte(text), "the result"); err != nil {
		return &Failure{Kind: InvalidOutput, Message: err.Error()}
	}
	var f *Failure
	if max := r.req.MaxOutputBytes; max > 0 && len(text) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
		f = &Failure{Kind: OutputLimit, Message: fmt.Sprintf("the value's JSON is %d bytes, over the %d-byte limit", len(out)-1, max)}
	}
	r.mu.Lock()
	r.res.Value = json.RawMessage(text)
	r.res.ValueBytes = len(out) - 1
	if f != nil {
		r.res.Failure = f
	}
	r.mu.Unlock()
	return nil
}

type described struct {
	Name     string `json:"name"`
	Message  string `json:"message"`
	Stack    string `json:"stack"`
	Kind     string `json:"kind"`
	Member   string `json:"member"`
	Boundary bool   `json:"boundary"`
}

var stackLoc = regexp.MustCompile(regexp.QuoteMeta(programFile) + `:(\d+):(\d+)`)

// describeThrown turns a thrown value into a Failure.
func (r *run) describeThrown(v quickjs.Value) *Failure {
	out, err := r.callValues(r.ctl.describe, v)
	if err != nil {
		return r.engineFailure(err)
	}
	var d described
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		return &Failure{Kind: Exception, Message: "an exception that could not be described"}
	}
	f := &Failure{Kind: Exception, Name: d.Name, Message: d.Message, Code: d.Kind, Member: d.Member, Stack: d.Stack}
	if m := stackLoc.FindStringSubmatch(d.Stack); m != nil {
		f.Line, _ = strconv.Atoi(m[1])
		f.Column, _ = strconv.Atoi(m[2])
	}
	return f
}

type failureError struct{ f *Failure }

func (e failureError) Error() string { return e.f.Message }

// engineFailure maps an instance error to a Failure.
func (r *run) engineFailure(err error) *Failure {
	var fe failureError
	if errors.As(err, &fe) {
		return fe.f
	}
	var exc *quickjs.Exception
	if errors.As(err, &exc) {
		f := r.describeThrown(exc.Value)
		r.in.Free(exc.Value)
		return f
	}
	r.mu.Lock()
	expiry := r.expiry
	r.mu.Unlock()
	if expiry != "" {
		return nil // result() reports the expiry
	}
	switch {
	case errors.Is(err, quickjs.ErrOutOfMemory):
		return &Failure{Kind: Memory, Message: fmt.Sprintf("the program exceeded its memory limit of %d bytes", r.req.MemoryBytes)}
	case errors.Is(err, quickjs.ErrInterrupted):
		// The instance's own clock passed the deadline before Run's timer fired.
		return TimeoutFailure(r.req.Timeout)
	}
	return &Failure{Kind: WorkerExit, Message: "the engine stopped: " + err.Error()}
}

// trackRejections folds the engine's rejection events into the set of
// promises rejected with no handler.
func (r *run) trackRejections() {
	promises, reasons, handled := r.in.TakeRejections()
	for i, p := range promises {
		id := r.in.Identity(p)
		if old, ok := r.rejected[id]; ok {
			r.in.Free(old.promise)
			r.in.Free(old.reason)
			delete(r.rejected, id)
		}
		if handled[i] {
			r.in.Free(p)
			r.in.Free(reasons[i])
			continue
		}
		r.rejected[id] = rejection{promise: p, reason: reasons[i]}
	}
}

func (r *run) freeRejections() {
	for id, rj := range r.rejected {
		r.in.Free(rj.promise)
		r.in.Free(rj.reason)
		delete(r.rejected, id)
	}
}

// unawaitedFailure reports the earliest call whose promise rejected and
// was never handled.
func (r *run) unawaitedFailure() *Failure {
	best, bestID := rejection{}, 0
	for _, rj := range r.rejected {
		s, err := r.callValues(r.ctl.callID, rj.promise)
		if err != nil {
			return r.engineFailure(err)
		}
		id, _ := strconv.Atoi(s)
		if id > 0 && (bestID == 0 || id < bestID) {
			best, bestID = rj, id
		}
	}
	if bestID == 0 {
		return nil
	}
	f := r.describeThrown(best.reason)
	f.Unawaited = true
	return f
}

// Host operations, the first argument of the prelude's host(...); the
// prelude's OP_ constants match. (Tool calls have a host function of
// their own, hostCall.)
const (
	opLog = iota + 1
	opTimer
	opClearTimer
	opCancel
	opChildren
	opURL
	opPath
	opFailure
)

// callPath is a tools path the program read, registered once so calls and
// listings name it by number.
type callPath struct {
	ns     int
	path   []string
	key    string // Call.Key
	misses int    // calls in a row not answered within spinFor
}

// host serves the prelude's host(op, ...) and hostCall(...) calls.
func (r *run) host(in *quickjs.Instance, name string, args []quickjs.Value) (quickjs.Value, error) {
	if name == "call" {
		return r.hostCall(in, args)
	}
	if len(args) == 0 {
		return in.Undefined()
	}
	op := int(in.Float64(args[0]))
	str := func(i int) string {
		if i >= len(args) {
			return ""
		}
		s, _ := in.String(args[i])
		return s
	}
	num := func(i int) int {
		if i >= len(args) {
			return 0
		}
		return int(in.Float64(args[i]))
	}
	switch op {
	case opLog:
		r.log(str(1), str(2))
	case opChildren:
		return in.NewString(r.children(num(1)))
	case opPath:
		return in.NewNumber(float64(r.registerPath(num(1), str(2))))
	case opFailure:
		return in.NewString(r.failure)
	case opURL:
		if err := r.loadURL(in); err != nil {
			return 0, err
		}
	case opTimer:
		r.timers[num(1)] = time.Now().Add(time.Duration(num(2)) * time.Millisecond)
	case opClearTimer:
		delete(r.timers, num(1))
	case opCancel:
		if c, ok := r.inflight[num(1)]; ok {
			c()
			delete(r.inflight, num(1))
			delete(r.held, num(1))
		}
	}
	return in.Undefined()
}

// hostCall serves the prelude's hostCall(pathId, json): it numbers the
// call and starts it, answering the result's JSON when the call finished
// at once, -id when it failed at once (the failure waits for OP_FAILURE),
// or id when it is under way.
func (r *run) hostCall(in *quickjs.Instance, args []quickjs.Value) (quickjs.Value, error) {
	r.callSeq++
	id := r.callSeq
	var pathID int
	var input string
	if len(args) == 2 {
		pathID = int(in.Float64(args[0]))
		input, _ = in.String(args[1])
	}
	switch result, state := r.startCall(id, pathID, input); state {
	case callDone:
		return in.NewString(result)
	case callFailed:
		r.failure = result
		return in.NewNumber(float64(-id))
	}
	return in.NewNumber(float64(id))
}

// registerPath records a path of namespace nsIndex given as a JSON array
// of names and returns its id, or 0 when it is malformed.
func (r *run) registerPath(nsIndex int, pathJSON string) int {
	if nsIndex < 0 || nsIndex >= len(r.req.Bindings) {
		return 0
	}
	// Paths are kept for the whole run; names the program makes up (a
	// million-character one in a loop) must not grow the host without
	// bound.
	r.pathBytes += len(pathJSON)
	if r.pathBytes > maxPathBytes {
		return 0
	}
	var path []string
	if json.Unmarshal([]byte(pathJSON), &path) != nil {
		return 0
	}
	r.paths = append(r.paths, callPath{ns: nsIndex, path: path, key: strings.Join(path, "\x00")})
	return len(r.paths)
}

// maxPathBytes bounds the JSON of the member paths one run registers: far
// more than any tool tree's paths, far less than host memory.
const maxPathBytes = 4 << 20

// lookupPath returns the registered path with id, or nil.
func (r *run) lookupPath(id int) *callPath {
	if id < 1 || id > len(r.paths) {
		return nil
	}
	return &r.paths[id-1]
}

// children lists, as JSON, the member names directly below a registered
// path, in the order the members were given.
func (r *run) children(pathID int) string {
	p := r.lookupPath(pathID)
	if p == nil {
		return "[]"
	}
	var names []string
	seen := map[string]bool{}
	for _, m := range r.req.Bindings[p.ns].Members {
		if len(m) <= len(p.path) || !slices.Equal(m[:len(p.path)], p.path) || seen[m[len(p.path)]] {
			continue
		}
		seen[m[len(p.path)]] = true
		names = append(names, m[len(p.path)])
	}
	if names == nil {
		return "[]"
	}
	b, _ := json.Marshal(names)
	return string(b)
}

// loadURL installs URL and URLSearchParams from their bytecode.
func (r *run) loadURL(in *quickjs.Instance) error {
	fn, err := in.EvalBytecode(r.s.url)
	if err != nil {
		return err
	}
	defer in.Free(fn)
	v, err := in.Call(fn, in.Global(), in.Global())
	if err != nil {
		return err
	}
	in.Free(v)
	return nil
}

func (r *run) log(level, text string) {
	r.mu.Lock()
	// Once a line is dropped, every later one is too, so the kept lines
	// are always a prefix of the output.
	if r.res.LogsDropped > 0 || r.logBytes+len(text)+1 > r.req.MaxLogBytes {
		r.res.LogsDropped++
		r.mu.Unlock()
		return
	}
	r.logBytes += len(text) + 1
	l := Log{Level: level, Text: text}
	r.res.Logs = append(r.res.Logs, l)
	r.mu.Unlock()
	if r.req.OnLog != nil {
		r.req.OnLog(l)
	}
}

// How startCall left a call.
const (
	callStarted = iota // under way: settle delivers the outcome later
	callDone           // finished while being started; the result is its JSON
	callFailed         // refused or failed at once; the result is {kind, message}
)

// startCall admits a call and starts its work. A call that is refused, or
// whose work finishes while the call is being started, is decided at once.
func (r *run) startCall(id, pathID int, input string) (result string, state int) {
	refuse := func(kind, msg string) (string, int) {
		b, _ := json.Marshal(map[string]string{"kind": kind, "message": msg})
		return string(b), callFailed
	}
	p := r.lookupPath(pathID)
	if p == nil {
		return refuse("Error", "the call names no usable path: a run may name at most 4 MiB of distinct member paths")
	}
	if err := CheckData([]byte(input), "the input"); err != nil {
		return refuse(r.dataKind(p.ns), err.Error())
	}
	work, err := admit(r.req.Bindings[p.ns], Call{ID: id, Path: p.path, Key: p.key, Input: json.RawMessage(input)})
	if err == ErrHold && r.req.Suspend {
		r.inflight[id] = func() {}
		r.held[id] = heldCall{ns: p.ns, path: pathID, input: input}
		return "", callStarted
	}
	if err != nil {
		ce := &CallError{Kind: "Error", Message: "the call was refused"}
		errors.As(err, &ce)
		return refuse(ce.Kind, ce.Message)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	r.inflight[id] = cancel
	nsIndex := p.ns
	handed := goWork(func() {
		out, err := runWork(ctx, work)
		select {
		case r.completions <- completion{id: id, ns: nsIndex, out: out, err: err}:
		case <-r.stop:
		}
	})
	return r.awaitQuick(id, p, handed)
}

// awaitQuick gives a call's work a few microseconds to finish before the
// program continues. Most tools answer at once, and an answer caught here
// goes back with the call itself: no second crossing into the engine and
// no wakeup of the run loop. A path that failed to answer in time on
// slowAfter calls in a row is not waited for again in this run, so slow
// tools cost nothing here after their first calls; one miss alone may be
// a collection or a busy machine.
//
// A call handed to a waiting worker runs on another processor: the wait
// polls a few turns before it yields (yielding takes the scheduler's
// lock, which the worker contends for). Otherwise the work may be queued
// on this very processor, and the wait yields at every turn.
func (r *run) awaitQuick(id int, p *callPath, handed bool) (string, int) {
	if p.misses >= slowAfter {
		// Yield once all the same. The call's goroutine most likely
		// waits on this processor, and so do the timers of calls
		// started here: a program starting many calls in one go would
		// otherwise hold them for milliseconds (measured: 200 parallel
		// calls of a 1 ms tool at cap 8 took 1.29× the ideal time
		// without this yield, 1.20× with it).
		runtime.Gosched()
		return "", callStarted
	}
	until := time.Now().Add(spinFor)
	for turn := 0; ; turn++ {
		select {
		case c := <-r.completions:
			if c.id != id {
				r.early = append(r.early, c) // the loop delivers it
				continue
			}
			p.misses = 0
			cid, payload, ok := r.outcome(c)
			switch {
			case !ok:
				return "", callStarted
			case cid < 0:
				return payload, callFailed
			default:
				return payload, callDone
			}
		default:
		}
		if !time.Now().Before(until) {
			p.misses++
			return "", callStarted
		}
		if !handed || turn >= pollTurns {
			runtime.Gosched()
		}
	}
}

// dataKind is the kind of a call refused for its data.
func (r *run) dataKind(nsIndex int) string {
	if ec := r.req.Bindings[nsIndex].ErrorClass; ec != nil && ec.DataKind != "" {
		return ec.DataKind
	}
	return "InvalidDataValue"
}

// admit calls Admit, turning a panic into a refusal.
func admit(ns Namespace, c Call) (w Work, err error) {
	defer func() {
		if p := recover(); p != nil {
			w, err = nil, &CallError{Kind: "Error", Message: "the call was refused"}
		}
	}()
	return ns.Admit(c)
}

// runWork runs a call's work, turning a panic into an error.
func runWork(ctx context.Context, w Work) (out json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("sandbox: call panicked: %v", p)
		}
	}()
	if w == nil {
		return json.RawMessage("null"), nil
	}
	return w(ctx)
}
