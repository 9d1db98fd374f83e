package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/mcp"
	"github.com/codemode-go/codemode/store"
	"github.com/nats-io/nats.go/jetstream"
)

// Asked is a run parked for approval: a worker's policy asked about some
// of its calls (Calls, each with its question in Reason and its input as
// the program made it; Call.Shown is what a person should see), and the
// run waits — in its record, holding no worker — until someone answers
// them on any front (Answer). It is mcp.Parked, so that a Node is an
// mcp.ParkingExecutor.
type Asked = mcp.Parked

// ErrAnswered is Answer's error when the run is not waiting for answers
// at that step: someone answered first, or the run moved on or ended.
var ErrAnswered = errors.New("cluster: the questions were answered already, or the run is not waiting for them")

// decision is an answer kept in a parked run's record.
type decision struct {
	Allow  bool   `json:"allow"`
	Reason string `json:"reason,omitempty"`
}

func (r record) asked(id string) *Asked {
	return &Asked{Run: id, Step: r.Step, Calls: r.Questions}
}

// Answer decides the questions of run id at step, on any front: one
// decision (Allow or Deny) per call asked about, by call index. Of any
// number of answers to one step, exactly one is taken (a compare-and-swap
// on the run's record); the others get ErrAnswered. A worker then resumes
// the run: allowed calls are made (through the ledger, like any call that
// may change something), denied ones fail in the program with the
// reason.
func (n *Node) Answer(ctx context.Context, id string, step int, answers map[int]codemode.Decision) error {
	if store.CheckID(id) != nil {
		return fmt.Errorf("%w: %q", ErrUnknownRun, id)
	}
	rec, rev, err := n.record(ctx, id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("%w: %s", ErrUnknownRun, id)
	case err != nil:
		return err
	case rec.Status != parked || rec.Step != step:
		return fmt.Errorf("%w (run %s is %s at step %d)", ErrAnswered, id, rec.Status, rec.Step)
	}
	if len(answers) != len(rec.Questions) {
		return fmt.Errorf("cluster: run %s asks %d questions, and %d answers were given", id, len(rec.Questions), len(answers))
	}
	rec.Answers = make(map[int]decision, len(answers))
	for _, q := range rec.Questions {
		d, ok := answers[q.Index]
		switch {
		case !ok:
			return fmt.Errorf("cluster: no answer for call %d (%s)", q.Index, q.Name)
		case d.Verdict != codemode.Allow && d.Verdict != codemode.Deny:
			return fmt.Errorf("cluster: the answer for call %d is %s; answer allow or deny", q.Index, d.Verdict)
		}
		rec.Answers[q.Index] = decision{Allow: d.Verdict == codemode.Allow, Reason: d.Reason}
		rec.Decided = append(rec.Decided, Answered{Step: step, Index: q.Index, Name: q.Name, Allow: d.Verdict == codemode.Allow,
			Reason: d.Reason, By: d.By, At: time.Now().UTC()})
	}
	rec.Status, rec.Since = answered, time.Now().UTC()
	rev, err = n.runs.Update(ctx, runKey(id), mustJSON(rec), rev)
	if err != nil {
		if isConflict(err) {
			return fmt.Errorf("%w (run %s: another answer came first)", ErrAnswered, id)
		}
		return err
	}
	n.answered(ctx, id)
	j := job{ID: id, Session: rec.Session, Tree: rec.Tree, Resume: true, Rev: rev, Cell: rec.Cell}
	if err := n.publish(ctx, jobMsg(j, id+"."+strconv.Itoa(step)+".resume")); err != nil {
		// The answers are kept: the run resumes with the next job for it.
		return fmt.Errorf("cluster: the answers are recorded, and queueing the run's resumption failed: %w", err)
	}
	return nil
}

// Start submits a run and waits until it ends or parks for approval (see
// Answer): the first half of an approval by round trips, whose second
// half, Continue, may come to any front.
func (n *Node) Start(ctx context.Context, rt *codemode.Runtime, code string) (codemode.Result, *Asked, error) {
	id := newID()
	return n.follow(ctx, id, false, func() error { return n.submit(ctx, rt, id, code) })
}

// Continue answers the questions of run id at step (see Answer) and waits
// until the run ends or parks again.
func (n *Node) Continue(ctx context.Context, id string, step int, answers map[int]codemode.Decision) (codemode.Result, *Asked, error) {
	if store.CheckID(id) != nil {
		return codemode.Result{}, nil, fmt.Errorf("%w: %q", ErrUnknownRun, id)
	}
	return n.follow(ctx, id, false, func() error { return n.Answer(ctx, id, step, answers) })
}
