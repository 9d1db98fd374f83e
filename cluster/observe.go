package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/store"
	"github.com/nats-io/nats.go/jetstream"
)

// What an operator sees: the runs, their questions, a cell's lines as
// they come. A console reads these without taking part in the runs: it
// answers only through Answer, cancels only through CancelCell, and
// reading a cell's lines does not move the cell's cursor.
//
// A run parked with questions is listed by a marker, q.<id> in CM_RUNS,
// written after the record parks (and again by a worker that finds the
// run parked, in case the one that parked it stopped first) and deleted
// once its questions are answered: Questions and WatchRuns find what
// waits for a person without reading every record.

// The statuses of a run, as RunInfo.Status gives them.
const (
	StatusQueued   = queued   // submitted, no worker has taken it yet
	StatusRunning  = running  // a worker runs it
	StatusParked   = parked   // it waits for answers to its questions
	StatusAnswered = answered // answered, for a worker to resume
	StatusDone     = finished // it ended: RunInfo.Result is set
)

// RunInfo is what the cluster knows of a run.
type RunInfo struct {
	ID      string `json:"id"`
	Status  string `json:"status"` // one of the Status constants
	Owner   string `json:"owner,omitempty"`
	Session string `json:"session,omitempty"`
	Cell    bool   `json:"cell,omitempty"`
	// Code is the program as submitted.
	Code string `json:"code"`
	// Created is when it was submitted; Updated when its record last
	// changed (for a finished run, when it ended).
	Created time.Time `json:"created,omitzero"`
	Updated time.Time `json:"updated"`
	// Step counts the run's checkpoints; Takeovers the workers that took
	// it over from another.
	Step      int `json:"step,omitempty"`
	Takeovers int `json:"takeovers,omitempty"`
	// Questions are what a parked run asks, each call's input whole.
	Questions []codemode.PendingCall `json:"questions,omitempty"`
	// Progress is what an unfinished run has done by its last checkpoint
	// or question: its tool calls so far and its latest console lines.
	Progress *codemode.Result `json:"progress,omitempty"`
	// Result is a finished run's.
	Result *codemode.Result `json:"result,omitempty"`
	// Answers are every answer its questions were given, in order.
	Answers []Answered `json:"answers,omitempty"`
	// Trace is the OpenTelemetry trace id of the request that submitted
	// it, when there was one.
	Trace string `json:"trace,omitempty"`
}

// Answered is an answer given to a run's question: by whom
// (codemode.Decision.By; "deadline" when no one answered in time), when,
// and what.
type Answered struct {
	Step   int       `json:"step"`
	Index  int       `json:"index"`
	Name   string    `json:"name"`
	Allow  bool      `json:"allow"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
}

func (r record) info(id string, updated time.Time) RunInfo {
	return RunInfo{ID: id, Status: r.Status, Owner: r.Owner, Session: r.Session, Cell: r.Cell, Code: r.Code,
		Created: r.Created, Updated: updated, Step: r.Step, Takeovers: r.Takeovers, Questions: r.Questions,
		Progress: r.Progress, Result: r.Result, Answers: r.Decided, Trace: r.Trace}
}

// Run returns what the cluster knows of run id (ErrUnknownRun when it has
// no record of it).
func (n *Node) Run(ctx context.Context, id string) (RunInfo, error) {
	if store.CheckID(id) != nil {
		return RunInfo{}, fmt.Errorf("%w: %q", ErrUnknownRun, id)
	}
	e, err := n.runs.Get(ctx, runKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return RunInfo{}, fmt.Errorf("%w: %s", ErrUnknownRun, id)
	} else if err != nil {
		return RunInfo{}, err
	}
	var rec record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return RunInfo{}, fmt.Errorf("cluster: the record of run %s: %w", id, err)
	}
	return rec.info(id, e.Created()), nil
}

// maxProgressLogBytes bounds the console lines a checkpoint keeps in
// RunInfo.Progress (the latest ones): the record must stay within a
// bucket value however much a run prints.
const maxProgressLogBytes = 16 << 10

// maxProgressCalls bounds the tool calls kept in RunInfo.Progress.
const maxProgressCalls = 2000

// progress is what a run's record keeps of a step's Result: its calls
// and its latest lines, bounded.
func progress(res codemode.Result) *codemode.Result {
	p := &codemode.Result{ToolCalls: res.ToolCalls, Truncated: res.Truncated}
	if len(p.ToolCalls) > maxProgressCalls {
		p.ToolCalls, p.Truncated = p.ToolCalls[:maxProgressCalls], true
	}
	size := 0
	i := len(res.Logs)
	for i > 0 && size+len(res.Logs[i-1])+1 <= maxProgressLogBytes {
		size += len(res.Logs[i-1]) + 1
		i--
	}
	if i > 0 {
		p.Truncated = true
	}
	p.Logs = res.Logs[i:]
	return p
}

func askKey(id string) string { return "q." + id }

// asking lists run id as waiting for answers to its questions at step.
func (n *Node) asking(ctx context.Context, id string, step int) {
	_, _ = n.runs.Put(context.WithoutCancel(ctx), askKey(id), []byte(strconv.Itoa(step)))
}

// answered takes run id off the list of runs waiting for answers.
func (n *Node) answered(ctx context.Context, id string) {
	_ = n.runs.Delete(context.WithoutCancel(ctx), askKey(id))
}

// Questions returns the runs parked with questions, oldest first.
func (n *Node) Questions(ctx context.Context) ([]RunInfo, error) {
	keys, err := n.runs.ListKeysFiltered(ctx, "q.>")
	if err != nil {
		return nil, err
	}
	var out []RunInfo
	for k := range keys.Keys() {
		id := strings.TrimPrefix(k, "q.")
		if ri, ok := n.parkedRun(ctx, id); ok {
			out = append(out, ri)
		}
	}
	sortByUpdate(out)
	return out, nil
}

// parkedRun returns run id when it is parked, and otherwise drops its
// marker if the marker is stale (the run was answered, or ended, and
// whoever did it stopped before dropping the marker). The marker is
// dropped only at the revision read before the record: a run that parks
// again meanwhile writes a new one, which stays.
func (n *Node) parkedRun(ctx context.Context, id string) (RunInfo, bool) {
	m, err := n.runs.Get(ctx, askKey(id))
	if err != nil {
		return RunInfo{}, false
	}
	ri, err := n.Run(ctx, id)
	switch {
	case err == nil && ri.Status == parked:
		return ri, true
	case err == nil || errors.Is(err, ErrUnknownRun):
		if time.Since(m.Created()) > time.Minute {
			_ = n.runs.Delete(ctx, askKey(id), jetstream.LastRevision(m.Revision()))
		}
	}
	return RunInfo{}, false
}

func sortByUpdate(rs []RunInfo) {
	slices.SortFunc(rs, func(a, b RunInfo) int { return a.Updated.Compare(b.Updated) })
}

// A RunEvent says that something changed about a run.
type RunEvent struct {
	ID   string
	Kind RunEventKind
	// At is when the change was stored.
	At time.Time
}

// RunEventKind says what changed.
type RunEventKind int

const (
	// RunChanged: the run's record changed (it was submitted, taken,
	// checkpointed, parked, answered or finished).
	RunChanged RunEventKind = iota + 1
	// RunGone: its record was deleted or expired.
	RunGone
	// RunAsking: it parked with questions.
	RunAsking
	// RunAnswered: its questions were answered (or it ended).
	RunAnswered
	// CellStarted: the run is a cell.
	CellStarted
)

// WatchRuns calls f with every run the cluster keeps (its record, its
// questions, whether it is a cell), each as of when it last changed, and
// then with each change as it is stored, until ctx ends or the watch
// fails. It reads no record: f reads what it needs (Run). f is called
// from one goroutine and must not block for long. The first calls, for
// what is already stored, are followed by one with a zero RunEvent.
func (n *Node) WatchRuns(ctx context.Context, f func(RunEvent)) error {
	w, err := n.runs.WatchFiltered(ctx, []string{"r.>", "q.>", "c.>"}, jetstream.MetaOnly())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("cluster: the watch of the runs ended")
			}
			if e == nil {
				f(RunEvent{})
				continue
			}
			ev, ok := runEvent(e)
			if ok {
				f(ev)
			}
		}
	}
}

func runEvent(e jetstream.KeyValueEntry) (RunEvent, bool) {
	kind, id, ok := strings.Cut(e.Key(), ".")
	if !ok {
		return RunEvent{}, false
	}
	ev := RunEvent{ID: id, At: e.Created()}
	deleted := e.Operation() != jetstream.KeyValuePut
	switch {
	case kind == "r" && deleted:
		ev.Kind = RunGone
	case kind == "r":
		ev.Kind = RunChanged
	case kind == "q" && deleted:
		ev.Kind = RunAnswered
	case kind == "q":
		ev.Kind = RunAsking
	case kind == "c" && !deleted:
		ev.Kind = CellStarted
	default:
		return RunEvent{}, false
	}
	return ev, true
}

// A CellLine is one message of a cell's log: a console line, or (Event
// set) the cell parking for answers ("park", Step set) or ending ("end").
// HandedOut says that a WaitCell has handed it out already.
type CellLine struct {
	Seq       uint64 `json:"seq"`
	Event     string `json:"event,omitempty"`
	Step      int    `json:"step,omitempty"`
	Text      string `json:"text,omitempty"`
	HandedOut bool   `json:"handedOut,omitempty"`
}

// FollowCell calls f with each message of cell id's log, from the first,
// as the stream stores them, until the end message, ctx's end, or f
// returning false. It does not move the cell's cursor: what it reads, a
// WaitCell still hands out. Once a cell's last lines were handed out its
// log is purged, and the lines are in its Result.
func (n *Node) FollowCell(ctx context.Context, id string, f func(CellLine) bool) error {
	if store.CheckID(id) != nil {
		return fmt.Errorf("%w: %q", codemode.ErrNoCell, id)
	}
	var handed uint64
	if cur, _, err := n.cursor(ctx, id); err == nil {
		handed = cur.Seq
	}
	cons, err := n.js.OrderedConsumer(ctx, logsStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{logSubject(id)}})
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return err
		}
		l := CellLine{Event: m.Headers().Get(eventHeader), Text: string(m.Data())}
		if meta, err := m.Metadata(); err == nil {
			l.Seq = meta.Sequence.Stream
		}
		if l.Event == "park" {
			l.Step, _ = strconv.Atoi(m.Headers().Get(stepHeader))
			l.Text = ""
		}
		l.HandedOut = l.Seq <= handed
		if !f(l) || l.Event == "end" {
			return nil
		}
	}
}
