package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/codemode-go/codemode/internal/quickjs"
)

// Kept heaps.
//
// A run with Request.Keep ends by writing its instance's heap as a State,
// the form a suspended run's takes, with nothing held: the globals the
// program declared (a Script's top-level declarations), the tools paths
// it registered, and the prelude's own state. A later run with
// Request.From starts in that heap and compiles its program there, so a
// session of runs works like a notebook's cells: each sees what the ones
// before it declared.

// keep writes the kept heap of a run that ended with f (nil: it
// succeeded). Only a run that ended by itself keeps anything: one that
// timed out, ran out of memory, was cancelled or whose engine died may
// have stopped anywhere.
func (r *run) keep(f *Failure) {
	in := r.in
	if in == nil || in.Dead() || in.Killed() {
		return
	}
	r.mu.Lock()
	expired := r.expiry != ""
	r.mu.Unlock()
	if expired {
		return
	}
	if f != nil && f.Syntax {
		return // nothing ran: the heap is the one the run started in
	}
	if f != nil {
		switch f.Kind {
		case Exception, InvalidOutput, OutputLimit:
		default:
			return
		}
	}
	// Calls still under way when the run ended (a throw does not wait
	// for them) never settle in the kept heap; their promises are
	// garbage there, like any unreachable value.
	p := parked{Memory: r.req.MemoryBytes, Spec: bindingSpec(r.req.Bindings), PathBytes: r.pathBytes,
		CallSeq: r.callSeq, Settled: true}
	for _, cp := range r.paths {
		p.Paths = append(p.Paths, parkedPath{NS: cp.ns, Path: cp.path})
	}
	if len(r.timers) > 0 {
		if _, err := r.callValues(r.ctl.cancelTimers); err != nil {
			return
		}
		clear(r.timers)
	}
	r.freeRejections()
	if r.main != 0 {
		// The kept heap must not hold each run's promise for ever.
		in.Free(r.main)
		r.main = 0
	}
	head, err := json.Marshal(p)
	if err != nil {
		return
	}
	lim := quickjs.SnapshotLimits{Room: 2*len(head) + r.req.StateRoom}
	if m := r.req.MaxStateBytes; m > 0 {
		lim.Max = int(max(m-int64(len(head)), 1))
	}
	// Writing the state is not part of the program's time: the run has
	// ended, and a deadline passing now must not lose the session.
	snap, sum, err := in.AppendSnapshot(context.WithoutCancel(r.ctx), nil, lim)
	var size *quickjs.SnapshotSizeError
	switch {
	case errors.As(err, &size):
		r.mu.Lock()
		r.res.KeepFailure = StateLimitFailure(size.About+int64(len(head)), r.req.MaxStateBytes)
		r.mu.Unlock()
		return
	case err != nil:
		r.mu.Lock()
		r.res.KeepFailure = &Failure{Kind: WorkerExit, Message: "the heap could not be kept: " + err.Error()}
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	r.res.Kept = &State{Header: head, Snapshot: snap, Sum: sum}
	r.mu.Unlock()
}

// runFrom is Run in a kept heap (Request.From).
func (s *Sandbox) runFrom(ctx context.Context, req Request) (Result, error) {
	p, b, pl, err := s.restore(req, *req.From)
	if err != nil {
		return Result{}, err
	}
	if len(p.Held) > 0 || !p.Settled {
		b.in.Close()
		pl.released()
		return Result{}, ErrStateCorrupt // a suspended run's state, not a kept heap
	}
	r := s.newRun(ctx, req)
	r.pool = pl
	r.pathBytes, r.callSeq = p.PathBytes, p.CallSeq
	for _, cp := range p.Paths {
		r.paths = append(r.paths, callPath{ns: cp.NS, path: cp.Path, key: strings.Join(cp.Path, "\x00")})
	}
	stop := context.AfterFunc(ctx, func() { r.expire(Abort) })
	r.work(func() *Failure {
		// The tools may have changed since the heap was kept.
		v, err := b.in.Call(b.ctl.retree, b.ctl.obj)
		if err != nil {
			return r.engineFailure(err)
		}
		b.in.Free(v)
		return r.begin(b)
	})
	stop()
	return r.result(), nil
}
