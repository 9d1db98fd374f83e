package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
)

// treeOf is what a run needs of the worker that runs it: the same tool
// tree, the same engine image and the same state format (a state resumes
// on no other image, nor on an earlier version's format). The image, not
// only the engine build: two versions with the same engine but another
// prelude cannot resume each other's states either.
func treeOf(rt *codemode.Runtime) string {
	img, err := rt.ImageSum()
	if err != nil {
		// A worker that cannot make the image runs nothing: no front's
		// tree names this.
		img = "no image: " + err.Error()
	}
	return rt.ToolTreeSum() + "/" + img[:min(16, len(img))] + "/" + codemode.StateFormat
}

// A job is what a front publishes to run a program.
type job struct {
	ID      string `json:"id"`
	Code    string `json:"code"`
	Session string `json:"session,omitempty"`
	// Tree is the front's ToolTreeSum and engine image: a worker with
	// another tool tree or engine hands the job back for one that has
	// them (during an upgrade, old workers finish old runs), and after
	// the last attempt the run fails saying why.
	Tree string `json:"tree"`
	// Rev is the revision of the record Submit made: a worker takes a
	// new run with one compare-and-swap, without reading it first.
	Rev uint64 `json:"rev,omitempty"`
	// Resume marks the job that continues a run parked for approval,
	// once its questions were answered.
	Resume bool `json:"resume,omitempty"`
	// Cell marks a cell's run, whose console lines go to CM_LOGS.
	Cell bool `json:"cell,omitempty"`
	// Created is when the run was submitted, Trace the OpenTelemetry
	// trace it was submitted in.
	Created time.Time `json:"created,omitzero"`
	Trace   string    `json:"trace,omitempty"`
}

// The states of a run's record.
const (
	queued   = "queued"
	running  = "running"
	parked   = "parked"   // waits for answers to its questions
	answered = "answered" // answered, for a worker to resume
	finished = "done"
)

// record is a run's record in CM_RUNS: who runs it, the state it last
// checkpointed, and at the end its result. Every change is a
// compare-and-swap on its revision, which is the fencing token: a worker
// that lost the run (it stalled past AckWait and another took over) has
// an old revision, and its writes are refused.
type record struct {
	Status  string           `json:"status"`
	Owner   string           `json:"owner"`
	Session string           `json:"session,omitempty"`
	Step    int              `json:"step,omitempty"`
	State   []byte           `json:"state,omitempty"`
	Result  *codemode.Result `json:"result,omitempty"`
	Since   time.Time        `json:"since"`
	Tree    string           `json:"tree,omitempty"`
	// Questions are the calls a parked run asks about (the policy's
	// questions, in their Reason), and Answers the decisions given, by
	// call index.
	Questions []codemode.PendingCall `json:"questions,omitempty"`
	Answers   map[int]decision       `json:"answers,omitempty"`
	// Takeovers counts the workers that took the run over from another.
	Takeovers int `json:"takeovers,omitempty"`
	// Cell marks a cell (StartCell).
	Cell bool `json:"cell,omitempty"`

	// What an operator sees of the run (RunInfo): its program, when it
	// was submitted, what it has done so far (the audit and logs at its
	// last checkpoint or question), and every answer given to its
	// questions, with who gave it.
	Code     string           `json:"code,omitempty"`
	Created  time.Time        `json:"created,omitzero"`
	Progress *codemode.Result `json:"progress,omitempty"`
	Decided  []Answered       `json:"decided,omitempty"`
	// Trace is the OpenTelemetry trace the run was submitted in, if any.
	Trace string `json:"trace,omitempty"`
}

func runKey(id string) string { return "r." + id }

func (n *Node) record(ctx context.Context, id string) (record, uint64, error) {
	return getJSON[record](ctx, n.runs, runKey(id))
}

// newID names a run: 128 random bits, hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func doneSubject(id string) string   { return "cm.done." + id }
func cancelSubject(id string) string { return "cm.cancel." + id }

// ErrUnknownRun: Wait was given a run id the cluster has no record or
// job of (it never existed, or its record expired).
var ErrUnknownRun = errors.New("cluster: no such run")

// Submit publishes a run of code for a worker and returns its id, which
// Wait takes on any front. The session comes from ctx
// (codemode.WithSession). The job is durable once Submit returns: a
// worker that dies running it is replaced by another.
func (n *Node) Submit(ctx context.Context, rt *codemode.Runtime, code string) (string, error) {
	id := newID()
	return id, n.submit(ctx, rt, id, code)
}

func (n *Node) submit(ctx context.Context, rt *codemode.Runtime, id, code string) error {
	return n.submitJob(ctx, rt, id, code, false)
}

func (n *Node) submitJob(ctx context.Context, rt *codemode.Runtime, id, code string, cell bool) error {
	session, _ := codemode.SessionFrom(ctx)
	now := time.Now().UTC()
	j := job{ID: id, Code: code, Session: session, Tree: treeOf(rt), Cell: cell, Created: now, Trace: traceOf(ctx)}
	// The record first, so that Wait on any front knows the run from the
	// moment Submit returns.
	rev, err := n.runs.Create(ctx, runKey(j.ID), mustJSON(record{Status: queued, Session: session, Since: now, Tree: j.Tree, Cell: cell, Code: code, Created: now, Trace: traceOf(ctx)}))
	if err != nil {
		return fmt.Errorf("cluster: recording the run: %w", err)
	}
	j.Rev = rev
	if err := n.publish(ctx, jobMsg(j, j.ID)); err != nil {
		_ = n.runs.Delete(context.WithoutCancel(ctx), runKey(j.ID), jetstream.LastRevision(rev))
		return fmt.Errorf("cluster: submitting the run: %w", err)
	}
	return nil
}

// jobMsg is the message of a job, with the id the stream de-duplicates
// it by.
func jobMsg(j job, msgID string) *nats.Msg {
	m := nats.NewMsg(workSubject)
	m.Data = mustJSON(j)
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	return m
}

// Wait returns the result of run id once a worker has finished it, or
// what it asks when it parked for approval (see Answer), or ctx's error.
// It waits for the worker's notice, which carries the result, not by
// polling; since a notice can be lost, it reads the record once more
// every few seconds.
func (n *Node) Wait(ctx context.Context, id string) (codemode.Result, *Asked, error) {
	if store.CheckID(id) != nil {
		return codemode.Result{}, nil, fmt.Errorf("%w: %q", ErrUnknownRun, id)
	}
	return n.follow(ctx, id, true, nil)
}

// follow waits for run id to end or park, listening for its notices
// before first (which submits or answers it) runs, so that none comes too
// early; read reads the record first.
func (n *Node) follow(ctx context.Context, id string, read bool, first func() error) (codemode.Result, *Asked, error) {
	w, err := n.await(id)
	if err != nil {
		return codemode.Result{}, nil, err
	}
	defer w.stop()
	if first != nil {
		if err := first(); err != nil {
			return codemode.Result{}, nil, err
		}
	}
	return w.result(ctx, read)
}

// Execute submits a run and waits for its result: Runtime.Execute, run
// by a worker of the cluster. When the run parks for approval, approve
// decides each question (as Options.Approve does; nil denies them) and
// Execute answers them and waits on, unless someone else answered first.
// If ctx ends first the run is cancelled.
func (n *Node) Execute(ctx context.Context, rt *codemode.Runtime, code string,
	approve func(context.Context, codemode.Call, string) codemode.Decision) (codemode.Result, error) {
	none := codemode.Result{ToolCalls: []codemode.ToolCall{}}
	// Listening before submitting: the notice cannot come too early.
	id := newID()
	w, err := n.await(id)
	if err != nil {
		return none, err
	}
	defer w.stop()
	if err := n.submit(ctx, rt, id, code); err != nil {
		return none, err
	}
	read := false
	for {
		res, asked, err := w.result(ctx, read)
		if err != nil {
			n.Cancel(id)
			return none, err
		}
		if asked == nil {
			return res, nil
		}
		answers := decide(ctx, asked, approve)
		if err := n.Answer(ctx, id, asked.Step, answers); err != nil && !errors.Is(err, ErrAnswered) {
			n.Cancel(id)
			return none, err
		}
		read = true // the next notice, or the record, says what came of it
	}
}

// decide asks approve about each question of asked, at once.
func decide(ctx context.Context, asked *Asked, approve func(context.Context, codemode.Call, string) codemode.Decision) map[int]codemode.Decision {
	out := make(map[int]codemode.Decision, len(asked.Calls))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range asked.Calls {
		wg.Go(func() {
			d := codemode.Decision{Verdict: codemode.Deny, Reason: "it needs approval, and nobody can approve it here"}
			if approve != nil {
				d = safeApprove(ctx, approve, c)
			}
			mu.Lock()
			out[c.Index] = d
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func safeApprove(ctx context.Context, approve func(context.Context, codemode.Call, string) codemode.Decision, c codemode.PendingCall) (d codemode.Decision) {
	defer func() {
		if recover() != nil {
			d = codemode.Decision{Verdict: codemode.Deny, Reason: "the approval failed"}
		}
	}()
	return approve(ctx, c.Call, c.Reason)
}

// notice is what a worker publishes when a run ends or parks.
type notice struct {
	Result *codemode.Result `json:"result,omitempty"`
	Asked  *Asked           `json:"asked,omitempty"`
}

// waiter waits for one run's notices.
type waiter struct {
	n   *Node
	id  string
	ch  chan []byte
	sub *nats.Subscription
}

func (n *Node) await(id string) (*waiter, error) {
	w := &waiter{n: n, id: id, ch: make(chan []byte, 4)}
	sub, err := n.nc.Subscribe(doneSubject(id), func(m *nats.Msg) {
		select {
		case w.ch <- m.Data:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	w.sub = sub
	return w, nil
}

func (w *waiter) stop() { _ = w.sub.Unsubscribe() }

// result waits for the run's end or its questions (reading the record
// first when read).
func (w *waiter) result(ctx context.Context, read bool) (codemode.Result, *Asked, error) {
	check := time.NewTicker(5 * time.Second)
	defer check.Stop()
	for {
		if read {
			r, _, err := w.n.record(ctx, w.id)
			switch {
			case err == nil && r.Status == finished && r.Result != nil:
				return *r.Result, nil, nil
			case err == nil && r.Status == parked:
				return codemode.Result{}, r.asked(w.id), nil
			case errors.Is(err, jetstream.ErrKeyNotFound):
				return codemode.Result{}, nil, fmt.Errorf("%w: %s (it never existed, or its record expired)", ErrUnknownRun, w.id)
			case err != nil && ctx.Err() != nil:
				return codemode.Result{}, nil, ctx.Err()
			}
		}
		select {
		case data := <-w.ch:
			var nt notice
			if len(data) > 0 && json.Unmarshal(data, &nt) == nil {
				switch {
				case nt.Result != nil:
					return *nt.Result, nil, nil
				case nt.Asked != nil:
					return codemode.Result{}, nt.Asked, nil
				}
			}
			read = true // a notice without the result: it is in the record
		case <-check.C:
			read = true
		case <-ctx.Done():
			return codemode.Result{}, nil, ctx.Err()
		}
	}
}

// Cancel asks the worker running run id to stop it; the run ends with
// its result saying so. A run no worker holds at the moment is not
// affected.
func (n *Node) Cancel(id string) {
	_ = n.nc.Publish(cancelSubject(id), nil)
}

// traceOf is the id of the OpenTelemetry trace ctx is in, or "".
func traceOf(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
