package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codemode-go/codemode/internal/quickjs"
)

// Suspended runs.
//
// A run that waits only for held calls has no guest frame active: its
// whole state is the instance's (a snapshot against its configuration's
// image) and the run's bookkeeping on this side (registered paths, the
// held calls, timers, unhandled rejections, logs, the value when it has
// one). Suspending writes both as bytes; Resume makes a run of them again,
// in this process or another with the same engine, delivers results of
// held calls and drives it on. The bytes are not authenticated here: the
// caller signs them.

// ErrHold is returned by Namespace.Admit to hold a call (see
// Request.Suspend).
var ErrHold = errors.New("sandbox: call held")

// Errors Resume returns; nothing of the state has run when it does.
var (
	// ErrStateCorrupt: the bytes are not a suspended run's state.
	ErrStateCorrupt = errors.New("sandbox: the state is damaged or not a suspended run")
	// ErrStateEngine: the state was made with another engine build or
	// against another image (see Sandbox.ImageSum).
	ErrStateEngine = errors.New("sandbox: the state was made with another engine build or image")
	// ErrStateMismatch: the request differs from the suspended run's in
	// its memory limit or bindings.
	ErrStateMismatch = errors.New("sandbox: the state does not match the request")
	// ErrNotHeld: a delivered result names a call that is not held (or
	// names one twice).
	ErrNotHeld = errors.New("sandbox: result for a call that is not pending")
)

var errNoImages = errors.New("sandbox: runs cannot suspend in a sandbox that boots every run")

// Suspension is a suspended run.
type Suspension struct {
	// State is the run's state, for Resume.
	State State
	// Held are the calls the run waits for, in call order.
	Held []Held
	// NextTimer is how long after the suspension the program's earliest
	// timer is due; zero when it has none.
	NextTimer time.Duration
}

// State is a suspended run's state: the sandbox's header (JSON: the
// run's bookkeeping on this side) and the engine's snapshot. It is not
// framed or authenticated here: the caller keeps both in one envelope
// and checks where it came from. Snapshot has room after it for the
// envelope's own parts.
type State struct {
	Header   json.RawMessage
	Snapshot []byte
	// Sum is SnapshotSum(Snapshot), computed as the snapshot was written
	// (most of it copied with the blocks a step did not change); a State
	// given to Resume does not need it.
	Sum [32]byte
	// Blocks, when not nil, are the digests of the snapshot's blocks that
	// SnapshotSumBlocks gave the caller that authenticated it: Resume
	// keeps them, and the next snapshot does not hash those blocks again.
	Blocks [][32]byte
}

// SnapshotSum is a digest of a snapshot's bytes, or of any bytes, that a
// caller authenticates in place of all of them (quickjs.Sum).
func SnapshotSum(b []byte) [32]byte { return quickjs.Sum(b) }

// SnapshotSumBlocks is SnapshotSum, with the digests of the snapshot's
// blocks for State.Blocks (quickjs.SumBlocks).
func SnapshotSumBlocks(b []byte) ([32]byte, [][32]byte) { return quickjs.SumBlocks(b) }

// Held is a call held for a result.
type Held struct {
	ID    int // Call.ID
	NS    int // the namespace's index in Request.Bindings
	Path  []string
	Input json.RawMessage
	// Line and Column locate the call in Request.Program (1-based), as
	// the stack where the program made it says; zero when unknown.
	Line, Column int
}

// Delivery is the result of a held call.
type Delivery struct {
	ID  int
	Out json.RawMessage // the result's JSON when Err is nil
	Err error           // a *CallError reaches the program as is
}

type heldCall struct {
	ns, path int // namespace index, registered path id
	input    string
}

// parked is the run's side of a suspended run.
type parked struct {
	Memory      uint64          `json:"memory"`
	Spec        string          `json:"spec"`
	Main        quickjs.Value   `json:"main"`
	Paths       []parkedPath    `json:"paths"`
	PathBytes   int             `json:"pathBytes"`
	CallSeq     int             `json:"callSeq"`
	Timers      []parkedTimer   `json:"timers,omitempty"`
	Held        []parkedCall    `json:"held"`
	Rejected    [][3]uint32     `json:"rejected,omitempty"` // identity, promise, reason
	Settled     bool            `json:"settled,omitempty"`
	Failure     string          `json:"failure,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
	ValueBytes  int             `json:"valueBytes,omitempty"`
	OutFailure  *Failure        `json:"outFailure,omitempty"`
	Logs        []Log           `json:"logs,omitempty"`
	LogsDropped int             `json:"logsDropped,omitempty"`
	LogBytes    int             `json:"logBytes,omitempty"`
}

type parkedPath struct {
	NS   int      `json:"ns"`
	Path []string `json:"path"`
}

type parkedTimer struct {
	ID int           `json:"id"`
	In time.Duration `json:"in"` // time left when the run suspended
}

type parkedCall struct {
	ID    int             `json:"id"`
	Path  int             `json:"path"`
	Input json.RawMessage `json:"input"`
}

// StateLimitFailure is the failure of a run that waited for held calls
// with a state of about the given size, over max (Request.MaxStateBytes).
func StateLimitFailure(about, max int64) *Failure {
	return &Failure{Kind: StateLimit, Message: fmt.Sprintf(
		"the run cannot wait for its tool calls: its state would be about %d bytes, over the limit of %d bytes for the state of a waiting run", about, max)}
}

// suspend records the run's state in r.susp and ends the run. Writing the
// state is part of the run: it stops when the run's deadline passes or
// its caller cancels it (the run then ends as it would have while
// running), and when the state outgrows Request.MaxStateBytes.
func (r *run) suspend() *Failure {
	now := time.Now()
	p := parked{
		Memory: r.req.MemoryBytes, Spec: bindingSpec(r.req.Bindings), Main: r.main,
		PathBytes: r.pathBytes, CallSeq: r.callSeq, Settled: r.settled, Failure: r.failure,
	}
	for _, cp := range r.paths {
		p.Paths = append(p.Paths, parkedPath{NS: cp.ns, Path: cp.path})
	}
	susp := &Suspension{}
	first := true
	for id, due := range r.timers {
		in := max(due.Sub(now), 0)
		p.Timers = append(p.Timers, parkedTimer{ID: id, In: in})
		if first || in < susp.NextTimer {
			susp.NextTimer, first = max(in, 1), false
		}
	}
	slices.SortFunc(p.Timers, func(a, b parkedTimer) int { return a.ID - b.ID })
	for id, h := range r.held {
		p.Held = append(p.Held, parkedCall{ID: id, Path: h.path, Input: json.RawMessage(h.input)})
	}
	slices.SortFunc(p.Held, func(a, b parkedCall) int { return a.ID - b.ID })
	for _, h := range p.Held {
		cp := r.paths[h.Path-1]
		line, col := r.callSite(h.ID)
		susp.Held = append(susp.Held, Held{ID: h.ID, NS: cp.ns, Path: cp.path, Input: h.Input, Line: line, Column: col})
	}
	for id, rj := range r.rejected {
		p.Rejected = append(p.Rejected, [3]uint32{id, uint32(rj.promise), uint32(rj.reason)})
	}
	slices.SortFunc(p.Rejected, func(a, b [3]uint32) int { return int(a[0]) - int(b[0]) })
	r.mu.Lock()
	p.Value, p.ValueBytes, p.OutFailure = r.res.Value, r.res.ValueBytes, r.res.Failure
	p.Logs, p.LogsDropped, p.LogBytes = r.res.Logs, r.res.LogsDropped, r.logBytes
	r.mu.Unlock()
	head, err := json.Marshal(p)
	if err != nil {
		return &Failure{Kind: WorkerExit, Message: "the run could not be suspended: " + err.Error()}
	}
	// The snapshot is the state's first and largest part; the envelope's
	// header (this one inside it) goes after it, in room left for it, so
	// nobody copies it.
	trailer := len(head)
	lim := quickjs.SnapshotLimits{Room: 2*trailer + r.req.StateRoom}
	if m := r.req.MaxStateBytes; m > 0 {
		lim.Max = int(max(m-int64(trailer), 1))
	}
	snap, sum, err := r.in.AppendSnapshot(r.ctx, nil, lim)
	var size *quickjs.SnapshotSizeError
	switch {
	case r.ctx.Err() != nil:
		r.expire(r.ctxExpiry())
		return nil // result() reports the expiry
	case errors.As(err, &size):
		return StateLimitFailure(size.About+int64(trailer), r.req.MaxStateBytes)
	case err != nil:
		return &Failure{Kind: WorkerExit, Message: "the run could not be suspended: " + err.Error()}
	}
	susp.State = State{Header: head, Snapshot: snap, Sum: sum}
	// The rejection boxes live on in the state; this instance is done.
	r.rejected = map[uint32]rejection{}
	r.mu.Lock()
	r.susp = susp
	r.mu.Unlock()
	return nil
}

func decodeState(state State) (*parked, []byte, error) {
	var p parked
	dec := json.NewDecoder(bytes.NewReader(state.Header))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, nil, ErrStateCorrupt
	}
	snap := state.Snapshot
	for _, h := range p.Held {
		if h.Path < 1 || h.Path > len(p.Paths) {
			return nil, nil, ErrStateCorrupt
		}
	}
	for _, cp := range p.Paths {
		if cp.NS < 0 {
			return nil, nil, ErrStateCorrupt
		}
	}
	return &p, snap, nil
}

// Resume continues a suspended run: it delivers results, in order, to
// the held calls they name and drives the run until it ends or suspends
// again. req must have the suspended run's memory limit and bindings;
// its Deadline (or Timeout) bounds this part of the run, and Program and
// Fallback are not used. away is how much time the run counts as having
// passed while it was suspended: its timers and monotonic clock move on
// by that much (zero: the time away does not count).
//
// Errors: ErrStateCorrupt, ErrStateEngine, ErrStateMismatch, ErrNotHeld,
// ErrInvalidRequest and ErrClosed, all before anything of the run has
// run. Like Run, the run's own failures are in the Result.
func (s *Sandbox) Resume(ctx context.Context, req Request, state State, results []Delivery, away time.Duration) (Result, error) {
	if err := validate(&req); err != nil {
		return Result{}, err
	}
	if err := s.begin(); err != nil {
		return Result{}, err
	}
	defer s.runs.Done()
	p, b, pl, err := s.restore(req, state)
	if err != nil {
		return Result{}, err
	}
	in, ctl := b.in, b.ctl
	held := map[int]parkedCall{}
	for _, h := range p.Held {
		held[h.ID] = h
	}
	seen := map[int]bool{}
	for _, d := range results {
		if _, ok := held[d.ID]; !ok || seen[d.ID] {
			in.Close()
			pl.released()
			return Result{}, fmt.Errorf("%w: call %d", ErrNotHeld, d.ID)
		}
		seen[d.ID] = true
	}

	r := s.newRun(ctx, req)
	if !r.deadline.IsZero() && !time.Now().Before(r.deadline) {
		// Resumed after its deadline: it ends now, before any result
		// reaches the program.
		r.expire(Timeout)
	}
	r.pool = pl
	r.main, r.pathBytes, r.callSeq, r.settled, r.failure = p.Main, p.PathBytes, p.CallSeq, p.Settled, p.Failure
	for _, cp := range p.Paths {
		r.paths = append(r.paths, callPath{ns: cp.NS, path: cp.Path, key: strings.Join(cp.Path, "\x00")})
	}
	now := time.Now()
	for _, t := range p.Timers {
		r.timers[t.ID] = now.Add(t.In - away)
	}
	for _, h := range p.Held {
		r.inflight[h.ID] = func() {}
		r.held[h.ID] = heldCall{ns: r.paths[h.Path-1].ns, path: h.Path, input: string(h.Input)}
	}
	for _, rj := range p.Rejected {
		r.rejected[rj[0]] = rejection{promise: quickjs.Value(rj[1]), reason: quickjs.Value(rj[2])}
	}
	r.res = Result{Value: p.Value, ValueBytes: p.ValueBytes, Failure: p.OutFailure, Logs: p.Logs, LogsDropped: p.LogsDropped}
	r.logBytes = p.LogBytes
	for _, d := range results {
		h := r.held[d.ID]
		delete(r.held, d.ID)
		r.early = append(r.early, completion{id: d.ID, ns: h.ns, out: d.Out, err: d.Err})
	}
	in.AdvanceClock(away)
	stop := context.AfterFunc(ctx, func() { r.expire(Abort) })
	r.work(func() *Failure {
		r.bind(&booted{in: in, ctl: ctl})
		if away > 0 {
			// Timers due while the run was away fire before the results,
			// which arrived only now.
			if err := r.fireDue(); err != nil {
				return r.engineFailure(err)
			}
		}
		return r.loop()
	})
	stop()
	return r.result(), nil
}

// restore makes an instance of a state's snapshot, after checking the
// state against req: its memory limit and bindings must be the run's.
// The instance counts as the pool's until the run releases it.
func (s *Sandbox) restore(req Request, state State) (*parked, *booted, *pool, error) {
	p, snap, err := decodeState(state)
	if err != nil {
		return nil, nil, nil, err
	}
	if req.MemoryBytes == 0 {
		req.MemoryBytes = DefaultMemoryBytes
	}
	if p.Memory != req.MemoryBytes || p.Spec != bindingSpec(req.Bindings) {
		return nil, nil, nil, fmt.Errorf("%w: memory limit %d and bindings %s, the run had %d and %s",
			ErrStateMismatch, req.MemoryBytes, bindingSpec(req.Bindings), p.Memory, p.Spec)
	}
	for _, cp := range p.Paths {
		if cp.NS >= len(req.Bindings) {
			return nil, nil, nil, ErrStateCorrupt
		}
	}
	if s.bootEveryRun {
		return nil, nil, nil, errNoImages
	}
	pl := s.pool(poolKey{p.Memory, p.Spec})
	if pl == nil {
		return nil, nil, nil, ErrClosed
	}
	if err := pl.capture(s); err != nil {
		return nil, nil, nil, fmt.Errorf("sandbox: the engine could not start: %w", err)
	}
	img, ctl := pl.image()
	if img == nil {
		return nil, nil, nil, ErrClosed
	}
	in, err := img.ResumeSummed(context.Background(), snap, state.Blocks, nil)
	switch {
	case errors.Is(err, quickjs.ErrSnapshotImage):
		return nil, nil, nil, ErrStateEngine
	case errors.Is(err, quickjs.ErrSnapshotCorrupt):
		return nil, nil, nil, ErrStateCorrupt
	case err != nil:
		return nil, nil, nil, fmt.Errorf("sandbox: the engine could not resume the run: %w", err)
	}
	return p, &booted{in: in, ctl: ctl}, pl, nil
}

// callSite locates pending call id in the program, from the stack the
// prelude kept where the program made it: 0, 0 when it cannot.
func (r *run) callSite(id int) (line, col int) {
	idBox, err := r.in.NewNumber(float64(id))
	if err != nil {
		return 0, 0
	}
	defer r.in.Free(idBox)
	stack, err := r.callValues(r.ctl.site, idBox)
	if err != nil {
		return 0, 0
	}
	if m := stackLoc.FindStringSubmatch(stack); m != nil {
		line, _ = strconv.Atoi(m[1])
		col, _ = strconv.Atoi(m[2])
	}
	return line, col
}

// Compact returns a state's snapshot recompressed to be kept (see
// quickjs.Compact): smaller, and as resumable. ErrStateCorrupt: the
// snapshot is not whole.
func Compact(ctx context.Context, snapshot []byte) ([]byte, error) {
	out, err := quickjs.Compact(ctx, snapshot)
	if errors.Is(err, quickjs.ErrSnapshotCorrupt) {
		return nil, ErrStateCorrupt
	}
	return out, err
}
