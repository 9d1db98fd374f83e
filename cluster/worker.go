package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// MaxRuns is the most runs the worker runs at once; it takes jobs
	// only into free slots. Zero means 4.
	MaxRuns int
	// Logger receives a record per run and the worker's diagnostics; nil
	// discards them.
	Logger *slog.Logger
	// AskInDoubt turns a call in doubt after a takeover (its worker
	// stopped between claiming and recording it, and its tool is not
	// idempotent) into a question for a person — make it again? — and
	// parks the run until someone answers, or the deadline denies it
	// (Config.AnswerWithin). Otherwise the program is told at once that
	// the call's outcome is unknown.
	AskInDoubt bool
}

// Worker runs the cluster's jobs. Each run is durable: its state is
// checkpointed in the run's record before every call that may change
// something, each such call is claimed in the effect ledger before it is
// made and its result recorded after, and a worker that takes over a run
// from one that died continues from the last checkpoint without making a
// recorded call again (see RATIONALE.md, "What is exactly once in the
// cluster?").
type Worker struct {
	node *Node
	opts codemode.Options
	max  int
	log  *slog.Logger
	ask  bool // WorkerOptions.AskInDoubt

	rt      atomic.Pointer[codemode.Runtime]
	mu      sync.Mutex
	retired []*codemode.Runtime // closed with the worker: runs may hold them

	busy     atomic.Int64
	draining atomic.Bool
	drain    chan struct{} // closed by Drain
	drainMu  sync.Once
}

// NewWorker makes a worker whose runs use a Runtime configured by opts.
// opts.StateKey is required and must be the same on every worker (and
// the tool tree too): a run moves between workers as its state. The
// Runtime's policy is the host's (opts.Policy; none allows every call)
// with one change: a call the host allows is held for a checkpoint unless
// its tool is annotated read-only or idempotent, which run at once and
// may be repeated after a takeover.
func NewWorker(n *Node, opts codemode.Options, wo WorkerOptions) (*Worker, error) {
	if len(opts.StateKey) == 0 {
		return nil, errors.New("cluster: a worker needs Options.StateKey, the same on every worker")
	}
	opts.Policy = durable(opts.Policy)
	opts.Tools = undoOnce(n, opts.Tools)
	// A state travels in its run's record, base64 in JSON, and a record
	// is one message: a bigger state would fail every checkpoint, and the
	// run would go from worker to worker until it was given up. Capped,
	// the run fails at once saying its state is too large.
	if limit := recordRoom(n); opts.MaxStateBytes <= 0 || opts.MaxStateBytes > limit {
		opts.MaxStateBytes = limit
	}
	rt, err := codemode.New(opts)
	if err != nil {
		return nil, err
	}
	if wo.MaxRuns <= 0 {
		wo.MaxRuns = 4
	}
	log := wo.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{node: n, opts: opts, max: wo.MaxRuns, log: log, ask: wo.AskInDoubt, drain: make(chan struct{})}
	w.rt.Store(rt)
	return w, nil
}

// SetTools replaces the worker's tool tree (its MCP servers' tools
// changed, say): runs started after it use the new tree, runs under way
// keep theirs. A job from a front with another tree is handed back for a
// worker that has it.
func (w *Worker) SetTools(tools codemode.Tools) error {
	opts := w.opts
	opts.Tools = undoOnce(w.node, tools)
	rt, err := codemode.New(opts)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.retired = append(w.retired, w.rt.Swap(rt))
	w.mu.Unlock()
	return nil
}

// recordRoom is the most bytes of a run's record: the servers' largest
// message, less room for headers, with its state's bytes counted as
// base64.
func recordRoom(n *Node) int64 { return (n.nc.MaxPayload() - 64<<10) * 3 / 4 }

// durable wraps a host's policy for a worker: allowed calls of tools that
// are neither read-only nor idempotent are held (Hold)
// so the worker can checkpoint before making them.
func durable(host func(context.Context, codemode.Call) codemode.Decision) func(context.Context, codemode.Call) codemode.Decision {
	return func(ctx context.Context, c codemode.Call) codemode.Decision {
		d := codemode.Decision{Verdict: codemode.Allow}
		if host != nil {
			d = host(ctx, c)
		}
		switch {
		case d.Verdict != codemode.Allow || c.Declared:
			// A transaction's begin is judged by the tools it declares;
			// holding them would make every begin a question.
		case c.Annotations != nil && (c.Annotations.ReadOnly || c.Annotations.Idempotent):
		default:
			return codemode.Decision{Verdict: codemode.Hold}
		}
		return d
	}
}

// Runtime is the worker's Runtime (for its catalog and tool tree).
func (w *Worker) Runtime() *codemode.Runtime { return w.rt.Load() }

// Run takes jobs until ctx ends, then finishes the runs it holds (each
// within its own Timeout) and returns: a worker that is asked to stop
// hands back nothing half done.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.node.work.Consumer(ctx, consumer)
	if err != nil {
		return fmt.Errorf("cluster: the workers' consumer: %w", err)
	}
	// Drained (Drain, or a Drain from any node), the worker takes no more
	// jobs, and Run returns once its runs have ended.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-w.drain:
			stop()
		case <-ctx.Done():
		}
	}()
	sub, err := w.node.nc.Subscribe(drainSubject(w.node.cfg.Name), func(m *nats.Msg) {
		w.Drain()
		_ = m.Respond(mustJSON(w.busy.Load()))
	})
	if err != nil {
		return fmt.Errorf("cluster: listening for drain: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	w.node.register(w, true)
	defer w.node.register(w, false)
	slots := make(chan struct{}, w.max)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { w.expireDue(ctx) })
	for ctx.Err() == nil {
		// Take jobs only into free slots: a job taken waits for no one.
		slots <- struct{}{}
		free := 1
	fill:
		for free < w.max {
			select {
			case slots <- struct{}{}:
				free++
			default:
				break fill
			}
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		batch, err := cons.Fetch(free, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			for range free {
				<-slots
			}
			if ctx.Err() != nil {
				break
			}
			w.log.Warn("taking jobs failed", "error", err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		took := 0
		for msg := range batch.Messages() {
			took++
			wg.Add(1)
			w.busy.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				defer w.busy.Add(-1)
				w.handle(msg)
			}()
		}
		cancel()
		for range free - took {
			<-slots
		}
	}
	return nil
}

// handle runs one job to its end, or until this worker loses it.
func (w *Worker) handle(msg jetstream.Msg) {
	var j job
	if err := json.Unmarshal(msg.Data(), &j); err != nil || store.CheckID(j.ID) != nil {
		w.log.Warn("a malformed job was dropped", "subject", msg.Subject(), "bytes", len(msg.Data()))
		_ = msg.TermWithReason("malformed job")
		return
	}
	meta, _ := msg.Metadata()
	if meta != nil && meta.NumDelivered > uint64(w.node.cfg.MaxDeliver) {
		// Every worker that took it stopped before it finished: give it
		// up here, without running it, rather than end one more.
		w.deadLetter(msg, j, meta.NumDelivered-1)
		return
	}
	rt := w.rt.Load()
	if j.Tree != treeOf(rt) {
		// Another worker may have the tree; after the last delivery the
		// run ends saying why.
		if meta == nil || meta.NumDelivered < uint64(w.node.cfg.MaxDeliver) {
			_ = msg.NakWithDelay(time.Second)
			return
		}
		w.finishUnrun(j, "no worker has the tool tree and engine image of the front that sent this program: start workers of the same codemode version with the same tools (the same config, specs and flags) as the front")
		_ = msg.Term()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if j.Session != "" {
		ctx = codemode.WithSession(ctx, j.Session)
	}
	ctx = context.WithValue(ctx, idempotencyKey{}, j.ID)
	stop := w.heartbeat(msg)
	defer stop()
	sub, err := w.node.nc.Subscribe(cancelSubject(j.ID), func(*nats.Msg) { cancel() })
	if err == nil {
		defer func() { _ = sub.Unsubscribe() }()
	}
	if j.Cell {
		// Cancelled while no worker held it (CancelCell sets the flag,
		// then publishes the cancel this worker now listens for): it ends
		// without running on.
		if cur, _, err := w.node.cursor(ctx, j.ID); err == nil && cur.Cancelled {
			w.node.end(context.Background(), j.ID, func(r record) bool { return r.Status != finished }, "the cell was cancelled")
			_ = msg.Ack()
			return
		}
	}
	start := time.Now()
	ok, why := w.run(ctx, rt, j)
	if !ok {
		// Lost to another worker, or the record could not be written:
		// the job is not acknowledged, so the run goes on elsewhere.
		w.log.Info("run abandoned", "run", j.ID, "why", why)
		return
	}
	_ = msg.Ack()
	w.log.Info("run", "run", j.ID, "took", time.Since(start).Round(time.Microsecond))
}

// heartbeat tells the server the job is in progress, every third of
// AckWait, until stop.
func (w *Worker) heartbeat(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(w.node.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

// run takes the run's record and runs it from its last checkpoint (or
// its start) to its end. It reports false, and why, when the run was lost
// to another worker or its record could not be written.
func (w *Worker) run(ctx context.Context, rt *codemode.Runtime, j job) (bool, string) {
	// The run's record is written even when its program was cancelled.
	rctx := context.WithoutCancel(ctx)
	if !j.Resume {
		// A new run is taken in one step, at the revision Submit made.
		rec := record{Status: running, Owner: w.node.cfg.Name, Session: j.Session, Since: time.Now().UTC(), Tree: j.Tree, Cell: j.Cell,
			Code: j.Code, Created: j.Created, Trace: j.Trace}
		if rev, err := w.node.runs.Update(rctx, runKey(j.ID), mustJSON(rec), j.Rev); err == nil {
			return w.drive(ctx, rt, j, rec, rev)
		}
	}
	// Not new: delivered again, taken over, answered, or finished.
	rec, rev, err := w.node.record(rctx, j.ID)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return true, "the run has no record (it expired): dropped"
	case err != nil:
		return false, err.Error()
	case rec.Status == finished:
		w.node.ended(rctx, j.ID, rec)
		return true, "finished before"
	case rec.Status == parked:
		// A job delivered again while the run waits for answers: the
		// answers will queue the run's next job. The worker that parked
		// it may have stopped before listing its questions.
		w.node.asking(rctx, j.ID, rec.Step)
		return true, "waits for answers"
	case rec.Status == running:
		rec.Takeovers++
	}
	rec.Status, rec.Owner, rec.Since = running, w.node.cfg.Name, time.Now().UTC()
	if rev, err = w.node.runs.Update(rctx, runKey(j.ID), mustJSON(rec), rev); err != nil {
		return false, "taking the run: " + err.Error()
	}
	return w.drive(ctx, rt, j, rec, rev)
}

// drive runs a taken run from its record's state (or its start) to its
// end.
func (w *Worker) drive(ctx context.Context, rt *codemode.Runtime, j job, rec record, rev uint64) (bool, string) {
	rctx := context.WithoutCancel(ctx) // records are written after a cancel too
	var err error
	var res codemode.Result
	var s *codemode.Suspended
	var log *lines
	if j.Cell {
		log = &lines{n: w.node, id: j.ID}
		ctx = codemode.WithLogListener(ctx, log.print)
	}
	if rec.State == nil {
		res, s, err = rt.ExecuteSuspendable(ctx, j.Code)
	} else if s, err = rt.Inspect(rec.State); err == nil {
		// Taken over or answered: the calls of the last checkpoint,
		// through the ledger, and on.
		results, ask, _ := w.answer(ctx, rt, j.ID, s, nil, rec.Answers)
		if len(ask) > 0 {
			return w.park(rctx, rt, j, rec, rev, s.Step, ask)
		}
		rec.Questions, rec.Answers = nil, nil
		if log != nil {
			log.segment(s.Step)
		}
		res, s, err = rt.Resume(ctx, s.State, results...)
	}
	for err == nil && s != nil {
		rec.Step, rec.State, rec.Progress = s.Step, s.State, progress(res)
		if log != nil {
			// The lines before the checkpoint are stored before it: a
			// takeover replays only those after.
			if err := log.flush(rctx); err != nil {
				return false, err.Error()
			}
		}
		if q := questions(s); len(q) > 0 {
			return w.park(rctx, rt, j, rec, rev, s.Step, q)
		}
		checkpoint := func() error {
			var err error
			rev, err = w.node.runs.Update(rctx, runKey(j.ID), mustJSON(rec), rev)
			return err
		}
		results, ask, cerr := w.answer(ctx, rt, j.ID, s, checkpoint, nil)
		if cerr != nil {
			return false, "checkpointing step " + fmt.Sprint(s.Step) + ": " + cerr.Error()
		}
		if len(ask) > 0 {
			return w.park(rctx, rt, j, rec, rev, s.Step, ask)
		}
		if log != nil {
			log.segment(s.Step)
		}
		res, s, err = rt.Resume(ctx, s.State, results...)
	}
	if err != nil && res.Error == nil {
		res = codemode.Result{ToolCalls: res.ToolCalls, Error: &codemode.Diagnostic{Kind: codemode.ExecutionFailure, Message: err.Error(), Cause: codemode.CauseOf(err)}}
	}
	if res.ToolCalls == nil {
		res.ToolCalls = []codemode.ToolCall{}
	}
	rec.Status, rec.State, rec.Progress, rec.Result = finished, nil, nil, &res
	if b := mustJSON(rec); int64(len(b)) > recordRoom(w.node) {
		// Kept whole, it would fail every attempt to record it.
		res = codemode.Result{ToolCalls: res.ToolCalls, Error: &codemode.Diagnostic{Kind: codemode.ExecutionFailure,
			Message: fmt.Sprintf("the program's result is %d bytes, more than the %d a cluster run can hand back; return less (or set MaxOutputBytes)", len(b), recordRoom(w.node))}}
		rec.Result = &res
	}
	if log != nil {
		if err := log.flush(rctx); err != nil {
			return false, err.Error()
		}
	}
	if _, err := w.node.runs.Update(rctx, runKey(j.ID), mustJSON(rec), rev); err != nil {
		return false, "recording the result: " + err.Error()
	}
	w.node.ended(rctx, j.ID, rec)
	return true, ""
}

// answer produces the results of a step's pending calls. With a
// checkpoint, the step's state is recorded while the calls are claimed in
// the ledger (one round trip for both), and no call is made unless the
// checkpoint succeeded; its error is returned then.
// answers decide the calls asked about (a parked run's), and, with
// AskInDoubt, the calls in doubt; one with no answer is denied. With
// AskInDoubt, calls in doubt nobody has answered yet are returned as
// questions (their Reason set), and no call is made: the run parks.
func (w *Worker) answer(ctx context.Context, rt *codemode.Runtime, id string, s *codemode.Suspended, checkpoint func() error, answers map[int]decision) ([]codemode.CallResult, []codemode.PendingCall, error) {
	out := make([]codemode.CallResult, len(s.Pending))
	claims := make([]uint64, len(s.Pending))
	todo := make([]bool, len(s.Pending))
	doubtful := make([]bool, len(s.Pending))
	var wg sync.WaitGroup
	var cerr error
	if checkpoint != nil {
		wg.Go(func() { cerr = checkpoint() })
	}
	for i, c := range s.Pending {
		if c.Reason != "" {
			a, ok := answers[c.Index]
			if !ok || !a.Allow {
				out[i] = codemode.CallResult{Index: c.Index, Denied: cmp.Or(a.Reason, "no one approved it")}
				continue
			}
		}
		wg.Go(func() { out[i], todo[i], claims[i], doubtful[i] = w.claim(ctx, id, c) })
	}
	wg.Wait()
	if cerr != nil {
		return nil, nil, cerr
	}
	if w.ask {
		var ask []codemode.PendingCall
		for i, c := range s.Pending {
			if !doubtful[i] {
				continue
			}
			a, ok := answers[c.Index]
			switch {
			case !ok:
				c.Reason = doubtQuestion
				ask = append(ask, c)
			case a.Allow:
				if rev, ok := w.reclaim(ctx, id, c, claims[i]); ok {
					claims[i], todo[i] = rev, true
				}
			default:
				out[i] = doubt(c, "it was not made again: "+cmp.Or(a.Reason, "no one allowed it"))
			}
		}
		if len(ask) > 0 {
			return nil, ask, nil
		}
	}
	for i, c := range s.Pending {
		if todo[i] {
			wg.Go(func() { out[i] = w.make(ctx, rt, id, c, claims[i]) })
		}
	}
	wg.Wait()
	return out, nil, nil
}

// park has the run wait in its record, holding no worker, for answers to
// questions from any front; its deadline is scheduled.
func (w *Worker) park(ctx context.Context, rt *codemode.Runtime, j job, rec record, rev uint64, step int, questions []codemode.PendingCall) (bool, string) {
	rec.Status, rec.Questions, rec.Answers = parked, questions, nil
	// A parked run waits for a person: its state is kept compacted, a
	// quarter to a third smaller in the stream, for half a millisecond
	// here. (A checkpoint, which the run goes on from at once, is not.)
	if c, err := rt.CompactState(ctx, rec.State); err == nil {
		rec.State = c
	} else {
		w.log.Warn("compacting a parked run's state failed; it is kept as it was", "run", j.ID, "error", err)
	}
	if _, err := w.node.runs.Update(ctx, runKey(j.ID), mustJSON(rec), rev); err != nil {
		return false, "parking step " + fmt.Sprint(step) + ": " + err.Error()
	}
	w.node.asking(ctx, j.ID, step)
	w.node.notify(j.ID, notice{Asked: rec.asked(j.ID)})
	if j.Cell {
		w.node.logEvent(ctx, j.ID, "park", strconv.Itoa(step))
	}
	w.deadline(ctx, j.ID, step)
	return true, "parked for approval"
}

// deadLetter moves a job given up after MaxDeliver attempts to CM_DLQ,
// ends its run with a result saying so, and removes the job.
func (w *Worker) deadLetter(msg jetstream.Msg, j job, attempts uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dead := nats.NewMsg(dlqSubject)
	dead.Data = msg.Data()
	dead.Header.Set("Codemode-Attempts", fmt.Sprint(attempts))
	dead.Header.Set(jetstream.MsgIDHeader, "dlq-"+j.ID)
	if err := w.node.publish(ctx, dead); err != nil {
		w.log.Error("moving a job given up to the dead-letter stream failed", "run", j.ID, "error", err)
		return // delivered again later
	}
	w.log.Error("a run was given up: every worker that took it stopped before finishing it", "run", j.ID, "attempts", attempts)
	w.finishUnrun(j, fmt.Sprintf("the run was given up after %d attempts: each worker that took it stopped before it finished (a tool that ends the worker's process, say); its job is in the dead-letter stream %s", attempts, dlqStream))
	_ = msg.Term()
}

// finishUnrun ends a run that could not run, with a result saying why.
func (w *Worker) finishUnrun(j job, why string) {
	w.node.end(context.Background(), j.ID, func(r record) bool { return r.Status != finished }, why)
}

// questions are the pending calls a policy asked about.
func questions(s *codemode.Suspended) []codemode.PendingCall {
	var q []codemode.PendingCall
	for _, c := range s.Pending {
		if c.Reason != "" {
			q = append(q, c)
		}
	}
	return q
}

// Drain has the worker take no more jobs: Run returns once the runs it
// holds have ended. Node.Drain asks it from any node.
func (w *Worker) Drain() {
	w.drainMu.Do(func() {
		w.draining.Store(true)
		close(w.drain)
		w.node.touch()
		w.log.Info("draining: taking no more jobs, finishing the runs under way", "runs", w.busy.Load())
	})
}

func (w *Worker) status() WorkerStatus {
	return WorkerStatus{Slots: w.max, Busy: int(w.busy.Load()), Tree: treeOf(w.rt.Load()), Draining: w.draining.Load()}
}

// Close releases the worker's Runtimes; call it after Run has returned.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, rt := range w.retired {
		_ = rt.Close()
	}
	w.retired = nil
	return w.rt.Load().Close()
}
