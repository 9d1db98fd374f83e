package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cells across nodes.
//
// A cell is a run whose console lines are kept, in order, in CM_LOGS
// under cm.logs.<id>, followed by an end message once its result is
// recorded. WaitCell, on any front, reads the lines past the cell's
// cursor (c.<id> in CM_RUNS) as the stream delivers them, and moves the
// cursor past what it hands out with a compare-and-swap: two Waits at
// once never hand out the same line. A worker that takes the run over
// replays the lines printed since the last checkpoint under the message
// ids they had (the step they follow, their number within it, and a
// digest of the line), so the stream keeps each once; a replay that
// prints something else (a call's outcome is in doubt now) adds its
// lines after.

func logSubject(id string) string { return "cm.logs." + id }
func cursorKey(id string) string  { return "c." + id }

// Headers of the messages in CM_LOGS that are not lines.
const (
	eventHeader = "Codemode-Event" // "end" or "park"
	stepHeader  = "Codemode-Step"
)

// cursor is how far a cell's lines have been handed out.
type cursor struct {
	Seq       uint64 `json:"seq"`                 // the last message handed out
	Done      bool   `json:"done,omitempty"`      // the end was handed out: the cell is gone
	Cancelled bool   `json:"cancelled,omitempty"` // CancelCell: a worker that takes the run stops it
}

// StartCell submits code as a cell: a run that goes on after its caller
// stops waiting, whose console lines and result WaitCell collects on any
// front (of the same session). It returns the cell's id.
func (n *Node) StartCell(ctx context.Context, rt *codemode.Runtime, code string) (string, error) {
	id := newID()
	if _, err := n.runs.Create(ctx, cursorKey(id), mustJSON(cursor{})); err != nil {
		return "", fmt.Errorf("cluster: recording the cell: %w", err)
	}
	if err := n.submitJob(ctx, rt, id, code, true); err != nil {
		_ = n.runs.Delete(context.WithoutCancel(ctx), cursorKey(id))
		return "", err
	}
	return id, nil
}

// cell reads a cell's run record and cursor, as ctx's session sees them:
// a cell of another session, or none, is codemode.ErrNoCell.
func (n *Node) cell(ctx context.Context, id string) (record, cursor, uint64, error) {
	none := fmt.Errorf("%w: %s", codemode.ErrNoCell, id)
	if store.CheckID(id) != nil {
		return record{}, cursor{}, 0, none
	}
	rec, _, err := n.record(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return record{}, cursor{}, 0, none
	} else if err != nil {
		return record{}, cursor{}, 0, err
	}
	session, _ := codemode.SessionFrom(ctx)
	if !rec.Cell || rec.Session != session {
		return record{}, cursor{}, 0, none
	}
	cur, rev, err := n.cursor(ctx, id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || err == nil && cur.Done:
		return record{}, cursor{}, 0, none
	case err != nil:
		return record{}, cursor{}, 0, err
	}
	return rec, cur, rev, nil
}

func (n *Node) cursor(ctx context.Context, id string) (cursor, uint64, error) {
	return getJSON[cursor](ctx, n.runs, cursorKey(id))
}

// logEvent is one message of a cell's log stream.
type logEvent struct {
	seq  uint64
	kind string // "", "end" or "park"
	line string
}

// WaitCell returns a cell's news, as codemode.Cells.Wait does: the lines
// it printed since the last WaitCell (on any front), and its Result once
// it has ended, after which the cell is gone. It returns as soon as the
// run ends or has printed Config.CellYieldBytes, else when timeout
// passes (zero or less: no timeout) or ctx ends. When the run is parked
// with questions, approve decides them (nil denies them) and the run goes
// on: whoever waits for a cell answers for it.
func (n *Node) WaitCell(ctx context.Context, id string, timeout time.Duration,
	approve func(context.Context, codemode.Call, string) codemode.Decision) (codemode.CellUpdate, error) {
	u := codemode.CellUpdate{ID: id}
	rec, cur, _, err := n.cell(ctx, id)
	if err != nil {
		return u, err
	}
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	if rec.Status == parked {
		n.answerFor(ctx, id, rec, approve)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{logSubject(id)}}
	if cur.Seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, cur.Seq+1
	}
	cons, err := n.js.OrderedConsumer(ctx, logsStream, cfg)
	if err != nil {
		return u, fmt.Errorf("cluster: reading cell %s: %w", id, err)
	}
	events := make(chan logEvent, 64)
	quit := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev := logEvent{kind: m.Headers().Get(eventHeader), line: string(m.Data())}
		if meta, err := m.Metadata(); err == nil {
			ev.seq = meta.Sequence.Stream
		}
		if ev.kind == "park" {
			ev.line = m.Headers().Get(stepHeader)
		}
		select {
		case events <- ev:
		case <-quit:
		}
	})
	if err != nil {
		return u, fmt.Errorf("cluster: reading cell %s: %w", id, err)
	}
	var mu sync.Once
	stop := func() { mu.Do(func() { close(quit); cc.Stop() }) }
	defer stop()

	var got []logEvent
	size := 0
collect:
	for {
		select {
		case ev := <-events:
			got = append(got, ev)
			switch ev.kind {
			case "end":
				break collect
			case "park":
				if rec, _, err := n.record(ctx, id); err == nil && rec.Status == parked && strconv.Itoa(rec.Step) == ev.line {
					n.answerFor(ctx, id, rec, approve)
				}
			default:
				if size += len(ev.line) + 1; size >= n.cfg.CellYieldBytes {
					break collect
				}
			}
		case <-timer:
			break collect
		case <-ctx.Done():
			return u, ctx.Err()
		}
	}
	stop()
	return n.handOut(ctx, id, got)
}

// handOut moves cell id's cursor past got, keeping what another Wait
// handed out meanwhile, and returns what was left for this one.
func (n *Node) handOut(ctx context.Context, id string, got []logEvent) (codemode.CellUpdate, error) {
	u := codemode.CellUpdate{ID: id}
	for {
		cur, rev, err := n.cursor(ctx, id)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || err == nil && cur.Done:
			return u, fmt.Errorf("%w: %s", codemode.ErrNoCell, id)
		case err != nil:
			return u, err
		}
		var keep []logEvent
		for _, ev := range got {
			if ev.seq > cur.Seq {
				keep = append(keep, ev)
			}
		}
		if len(keep) == 0 {
			return codemode.CellUpdate{ID: id}, nil // another Wait took them
		}
		next := cursor{Seq: keep[len(keep)-1].seq, Cancelled: cur.Cancelled}
		u.Logs = nil
		for _, ev := range keep {
			switch ev.kind {
			case "":
				u.Logs = append(u.Logs, ev.line)
			case "end":
				next.Done = true
			}
		}
		if next.Done {
			rec, _, err := n.record(ctx, id)
			if err != nil || rec.Result == nil {
				return codemode.CellUpdate{ID: id}, fmt.Errorf("cluster: cell %s ended, and its result cannot be read: %v", id, err)
			}
			u.Done, u.Result = true, rec.Result
		}
		_, err = n.runs.Update(ctx, cursorKey(id), mustJSON(next), rev)
		if err == nil {
			if next.Done {
				// Nobody can read them any more.
				go func() {
					_ = n.logs.Purge(context.Background(), jetstream.WithPurgeSubject(logSubject(id)))
				}()
			}
			return u, nil
		}
		if !isConflict(err) {
			return codemode.CellUpdate{ID: id}, err
		}
		u = codemode.CellUpdate{ID: id}
	}
}

// answerFor decides the questions of a parked cell with approve (nil
// denies them) and answers them; an answer that came first elsewhere
// wins.
func (n *Node) answerFor(ctx context.Context, id string, rec record,
	approve func(context.Context, codemode.Call, string) codemode.Decision) {
	_ = n.Answer(ctx, id, rec.Step, decide(ctx, rec.asked(id), approve))
}

// CancelCell stops a cell's run, as codemode.Cells.Cancel does: its last
// WaitCell returns the Result the run ended with. Only the cell's own
// session (ctx's) can cancel it. A run a worker holds is stopped at once;
// one waiting in the queue is stopped by the worker that takes it; one
// parked for approval ends without running on.
func (n *Node) CancelCell(ctx context.Context, id string) error {
	rec, _, _, err := n.cell(ctx, id)
	if err != nil {
		return err
	}
	for {
		cur, rev, err := n.cursor(ctx, id)
		if err != nil {
			return err
		}
		cur.Cancelled = true
		if _, err = n.runs.Update(ctx, cursorKey(id), mustJSON(cur), rev); err == nil {
			break
		} else if !isConflict(err) {
			return err
		}
	}
	n.Cancel(id)
	if rec.Status == parked {
		// Parked, it holds no worker: end it here, unless a worker took
		// it meanwhile (the record changed) and sees the flag.
		n.end(ctx, id, func(r record) bool { return r.Status == parked }, "the cell was cancelled while it waited for answers to its questions")
	}
	return nil
}

// end finishes run id with a diagnostic when its record still is what
// ok wants, and tells its waiters.
func (n *Node) end(ctx context.Context, id string, ok func(record) bool, why string) {
	rec, rev, err := n.record(ctx, id)
	switch {
	case err != nil:
		return
	case rec.Status == finished:
		n.ended(ctx, id, rec) // again: its end may not have been told
		return
	case !ok(rec):
		return
	}
	wasParked := rec.Status == parked
	calls := []codemode.ToolCall{}
	if rec.Progress != nil {
		calls = rec.Progress.ToolCalls
	}
	rec.Status, rec.State, rec.Questions, rec.Answers, rec.Progress = finished, nil, nil, nil, nil
	rec.Result = &codemode.Result{ToolCalls: calls, Error: &codemode.Diagnostic{Kind: codemode.ExecutionFailure, Message: why}}
	if _, err := n.runs.Update(ctx, runKey(id), mustJSON(rec), rev); err == nil {
		if wasParked {
			n.answered(ctx, id)
		}
		n.ended(ctx, id, rec)
	}
}

// ended tells whoever waits for run id that it has ended: the fronts
// waiting on its notice and, for a cell, the end message after its lines.
func (n *Node) ended(ctx context.Context, id string, rec record) {
	n.notify(id, notice{Result: rec.Result})
	if rec.Cell {
		n.logEvent(ctx, id, "end", "")
	}
}

// logEvent appends an end or park message to a cell's log stream, once
// (its message id de-duplicates it).
func (n *Node) logEvent(ctx context.Context, id, kind, step string) {
	m := nats.NewMsg(logSubject(id))
	m.Header.Set(eventHeader, kind)
	msgID := id + "." + kind
	if step != "" {
		m.Header.Set(stepHeader, step)
		msgID += "." + step
	}
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	_ = n.publish(context.WithoutCancel(ctx), m)
}

// notify tells the fronts waiting for run id that it has ended or parked,
// with its result when it fits in a message (else they read the record).
func (n *Node) notify(id string, nt notice) {
	var data []byte
	if b, err := json.Marshal(nt); err == nil && int64(len(b)) < n.nc.MaxPayload()-1024 {
		data = b
	}
	_ = n.nc.Publish(doneSubject(id), data)
}

// lines publishes a cell's console lines as its run prints them, without
// waiting for each to be stored; flush waits for them all. Each line's
// message id is the step its segment of the run started from, its number
// in the segment and a digest of it: a run resumed from a checkpoint
// prints its lines again under the same ids, and the stream drops them.
type lines struct {
	n    *Node
	id   string
	mu   sync.Mutex
	seg  int
	num  int
	sent []pending
}

type pending struct {
	msg *nats.Msg
	ack jetstream.PubAckFuture // nil: publish it again at flush
}

// segment starts the lines of the segment that resumes from step.
func (l *lines) segment(step int) {
	l.mu.Lock()
	l.seg, l.num = step, 0
	l.mu.Unlock()
}

func (l *lines) print(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := nats.NewMsg(logSubject(l.id))
	m.Data = []byte(line)
	sum := sha256.Sum256(m.Data)
	m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s.%d.%d.%x", l.id, l.seg, l.num, sum[:6]))
	l.num++
	ack, err := l.n.js.PublishMsgAsync(m)
	if err != nil {
		ack = nil
	}
	l.sent = append(l.sent, pending{m, ack})
}

// flush waits until every line printed so far is stored, publishing again
// (with its id, so never twice) a line whose publish failed.
func (l *lines) flush(ctx context.Context) error {
	l.mu.Lock()
	sent := l.sent
	l.sent = nil
	l.mu.Unlock()
	for _, p := range sent {
		if p.ack != nil {
			select {
			case <-p.ack.Ok():
				continue
			case <-p.ack.Err():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := l.n.publish(ctx, p.msg); err != nil {
			return fmt.Errorf("storing a console line of cell %s: %w", l.id, err)
		}
	}
	return nil
}
