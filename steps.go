package codemode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/codemode-go/codemode/store"
)

// ErrStepTaken is returned by Steps.Resume for a state whose step was
// taken already, or that is not its run's current step: an older state
// of the run, a state of a run that has ended, or one the run store does
// not know. Nothing of the run runs, and no call is made.
var ErrStepTaken = errors.New("codemode: the step was taken already")

// Steps runs suspendable runs so that each step runs at most once, however
// many processes hold its state and however often it is replayed. A state
// is a value (Resume can run it twice), so the fence is a record per run
// in a run store shared by every process that resumes the run: Start
// records each run's first step, and Resume takes a step — a
// compare-and-swap on the record, which exactly one taker wins — before
// any of its pending calls is made, then records the step the run
// reached, or forgets the run once it has ended.
//
// A step whose taker stopped before recording the next (a crash, a
// cancelled context) stays taken: its calls may have been made, and
// running them again could do twice what the program meant once, so it
// is refused like any other taken step.
type Steps struct {
	Runtime *Runtime
	Runs    store.Runs
	// Owner names this process in the records of the steps it takes
	// (ErrStepTaken messages name it). Empty means host:pid.
	Owner string
	// KeepStates keeps each step's state in its record too, so that a
	// host can hand out a reference to a run (its RunID and Step) instead
	// of the state, and read the state back with State.
	KeepStates bool
	// CompactStates compacts each step's state (Runtime.CompactState)
	// before it is recorded: the Suspended that Start and Resume return
	// holds the compacted state, the one the record's sum fences. For
	// steps that wait for a person, whose states are kept a while; it
	// costs a fraction of a millisecond per step.
	CompactStates bool
}

// Start runs code as Runtime.ExecuteSuspendable does and, when the run
// suspends, records its first step.
func (d Steps) Start(ctx context.Context, code string) (Result, *Suspended, error) {
	if err := d.check(); err != nil {
		return Result{ToolCalls: []ToolCall{}}, nil, err
	}
	res, s, err := d.Runtime.ExecuteSuspendable(ctx, code)
	if err != nil || s == nil {
		return res, s, err
	}
	d.compact(ctx, s)
	if _, err := d.Runs.Create(ctx, s.RunID, d.record(s)); err != nil {
		return res, nil, fmt.Errorf("codemode: recording the run: %w", err)
	}
	return res, s, nil
}

// Answer produces the results of a taken step's pending calls (s is the
// step, from its authenticated state): by calling Runtime.RunPending, by asking
// someone, or by reading answers prepared before. Steps.Resume calls it at
// most once per step, after the step is taken, so it is the place to make
// the calls.
type Answer func(ctx context.Context, s *Suspended) ([]CallResult, error)

// Resume takes the step state holds, gets its results from answer,
// resumes the run with them and records the step it reached (or forgets
// the run, when it has ended). It returns ErrStepTaken, before answer is
// called, for a step taken before or not the run's current one; the
// errors of Inspect for a state that is not valid; and answer's error,
// after which the step stays taken.
func (d Steps) Resume(ctx context.Context, state []byte, answer Answer) (Result, *Suspended, error) {
	none := Result{ToolCalls: []ToolCall{}}
	if err := d.check(); err != nil {
		return none, nil, err
	}
	s, err := d.Runtime.Inspect(state)
	if err != nil {
		return none, nil, err
	}
	rev, err := d.take(ctx, s, state)
	if err != nil {
		return none, nil, err
	}
	results, err := answer(ctx, s)
	if err != nil {
		return none, nil, err
	}
	res, next, err := d.Runtime.Resume(ctx, state, results...)
	switch {
	case next != nil:
		d.compact(ctx, next)
		_, rerr := d.Runs.Update(ctx, s.RunID, d.record(next), rev)
		if rerr != nil {
			return res, nil, fmt.Errorf("codemode: recording step %d of run %s: %w", next.Step, s.RunID, rerr)
		}
	case err == nil:
		// The run has ended: no state of it may run again, which a
		// missing record says as well as any.
		if rerr := d.Runs.Delete(ctx, s.RunID, rev); rerr != nil {
			return res, nil, fmt.Errorf("codemode: recording the end of run %s: %w", s.RunID, rerr)
		}
	}
	return res, next, err
}

// take claims the step s is at, for this process.
func (d Steps) take(ctx context.Context, s *Suspended, state []byte) (uint64, error) {
	rec, rev, err := d.Runs.Get(ctx, s.RunID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, fmt.Errorf("%w: run %s is not in the run store: it has ended, or it was not started with this store", ErrStepTaken, s.RunID)
	case err != nil:
		return 0, fmt.Errorf("codemode: reading the run's record: %w", err)
	case rec.Step != s.Step:
		return 0, fmt.Errorf("%w: run %s is at step %d, and this state is of step %d", ErrStepTaken, s.RunID, rec.Step, s.Step)
	case rec.Sum != stateSum(state):
		return 0, fmt.Errorf("%w: step %d of run %s has another state", ErrStepTaken, s.Step, s.RunID)
	case rec.TakenBy != "":
		return 0, fmt.Errorf("%w: step %d of run %s was taken by %s at %s, and a step runs at most once (its calls may have been made)",
			ErrStepTaken, s.Step, s.RunID, rec.TakenBy, rec.TakenAt.Format(time.RFC3339))
	}
	rec.TakenBy, rec.TakenAt = d.owner(), time.Now().UTC()
	rec.State = nil // the record of a step taken needs no state
	rev, err = d.Runs.Update(ctx, s.RunID, rec, rev)
	switch {
	case errors.Is(err, store.ErrConflict):
		return 0, fmt.Errorf("%w: step %d of run %s was taken by another process just now", ErrStepTaken, s.Step, s.RunID)
	case err != nil:
		return 0, fmt.Errorf("codemode: taking the step: %w", err)
	}
	return rev, nil
}

// ErrNoRunStore: a Steps without a Runtime or a run store.
var ErrNoRunStore = errors.New("codemode: Steps needs a Runtime and a run store (Runs)")

func (d Steps) check() error {
	if d.Runtime == nil || d.Runs == nil {
		return ErrNoRunStore
	}
	return nil
}

// compact replaces s.State with its compacted form when CompactStates
// asks for it. A state that cannot be compacted (ctx ended) is kept as
// it is: it is as valid, only larger.
func (d Steps) compact(ctx context.Context, s *Suspended) {
	if !d.CompactStates {
		return
	}
	if c, err := d.Runtime.CompactState(ctx, s.State); err == nil {
		s.State = c
	}
}

// record is the record of a step not taken yet.
func (d Steps) record(s *Suspended) store.Run {
	r := store.Run{Step: s.Step, Sum: stateSum(s.State)}
	if d.KeepStates {
		r.State = s.State
	}
	return r
}

// State returns the state of a run's current step, from a run store that
// keeps them (KeepStates), and the step. It returns ErrStepTaken for a run
// the store does not know or whose step was taken, and an error for one
// whose record holds no state.
func (d Steps) State(ctx context.Context, runID string) ([]byte, int, error) {
	if err := d.check(); err != nil {
		return nil, 0, err
	}
	rec, _, err := d.Runs.Get(ctx, runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, 0, fmt.Errorf("%w: run %s is not in the run store: it has ended, or it was not started with this store", ErrStepTaken, runID)
	case err != nil:
		return nil, 0, fmt.Errorf("codemode: reading the run's record: %w", err)
	case rec.TakenBy != "":
		return nil, 0, fmt.Errorf("%w: step %d of run %s was taken by %s at %s", ErrStepTaken, rec.Step, runID, rec.TakenBy, rec.TakenAt.Format(time.RFC3339))
	case rec.State == nil:
		return nil, 0, fmt.Errorf("codemode: the record of run %s holds no state (it was not kept with KeepStates)", runID)
	}
	return rec.State, rec.Step, nil
}

func (d Steps) owner() string {
	if d.Owner != "" {
		return d.Owner
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

func stateSum(state []byte) string {
	sum := sha256.Sum256(state)
	return hex.EncodeToString(sum[:])
}
