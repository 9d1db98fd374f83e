package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Transactions.
//
// A program declares the tools a change touches and opens a transaction:
//
//	const { tx } = await tools.$codemode.begin({ touches: ["orders.charge", "orders.ship"] })
//	await tools.orders.charge({ ... })
//	await tools.orders.ship({ ... })
//	await tools.$codemode.commit({ tx })
//
// While it is open, only the declared tools may be called. The policy
// judges the begin by every declared tool (see judgeBegin) and each call
// when it is made, as it would outside a transaction. When the run fails
// or times out with the transaction open, or the program calls
// tools.$codemode.rollback({ tx }), the transaction's calls still running
// get CompensationGrace to return, and then the calls that completed are
// compensated in reverse order of completion (Tool.Compensate), each
// within CompensationGrace and recorded in the audit as
// "<tool>#compensate" with its outcome. What could not be undone is
// reported, never dropped. A run that ends well with a transaction open
// commits it.

// transaction is a transaction of a run. The exported fields travel in a
// suspended run's state; the others live in this process, under ex.mu.
type transaction struct {
	ID      int      `json:"id"` // the begin call's audit index
	Touches []string `json:"touches"`
	Done    []txStep `json:"done,omitempty"` // completed calls, in completion order

	running    int           // calls made here that have not returned
	ending     bool          // committing or rolling back: no call joins it
	rolledBack bool          // calls that have not started never will
	drained    chan struct{} // closed when running reaches zero while ending
}

type txStep struct {
	Index  int             `json:"index"`
	Name   string          `json:"name"`
	Path   []string        `json:"path"`
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
}

// txID is a transaction's id, or nil for none.
func txID(tx *transaction) *int {
	if tx == nil {
		return nil
	}
	id := tx.ID
	return &id
}

// parseTouches reads begin's input: the names of tools of the Runtime.
func (rt *Runtime) parseTouches(raw json.RawMessage) ([]string, error) {
	var in struct {
		Touches []string `json:"touches"`
	}
	if err := json.Unmarshal(raw, &in); err != nil || len(in.Touches) == 0 {
		return nil, fmt.Errorf(`pass { touches: ["<namespace>.<tool>", ...] }: the tools the transaction may call`)
	}
	var touches []string
	seen := map[string]bool{}
	for _, name := range in.Touches {
		if rt.byName[name] == nil {
			return nil, fmt.Errorf("%q is not a tool", name)
		}
		if !seen[name] {
			seen[name] = true
			touches = append(touches, name)
		}
	}
	return touches, nil
}

// txFor is the open transaction a call of a host tool belongs to: nil
// when none is open, and an error when the tool is outside its touched
// set.
func (ex *execution) txFor(name string, path []string) (*transaction, error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.tx == nil {
		return nil, nil
	}
	if !slices.Contains(ex.tx.Touches, name) {
		return nil, &callError{kind: ToolFailure, msg: fmt.Sprintf("%s is not in the open transaction's touched set (%s); commit it first, or declare it in begin",
			jsPath(path), strings.Join(ex.tx.Touches, ", "))}
	}
	return ex.tx, nil
}

// startTxCall and endTxCall count a transaction's calls that run here.
func (ex *execution) startTxCall(tx *transaction) {
	if tx == nil {
		return
	}
	ex.mu.Lock()
	tx.running++
	ex.mu.Unlock()
}

func (ex *execution) endTxCall(tx *transaction) {
	if tx == nil {
		return
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if tx.running--; tx.running == 0 && tx.drained != nil {
		close(tx.drained)
		tx.drained = nil
	}
}

func (ex *execution) txRolledBack(tx *transaction) bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return tx.rolledBack
}

// txRecord records a completed call in its transaction.
func (ex *execution) txRecord(tx *transaction, index int, name string, path []string, input, output json.RawMessage) {
	if tx == nil {
		return
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	tx.Done = append(tx.Done, txStep{Index: index, Name: name, Path: path, Input: input, Output: output})
}

// txTool serves begin, commit and rollback.
func (ex *execution) txTool(name string, index int) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		if name == "begin" {
			touches, err := ex.rt.parseTouches(raw)
			if err != nil {
				return nil, ToolError(err.Error())
			}
			return ex.openTx(index, touches)
		}
		var in struct {
			Tx *int `json:"tx"`
		}
		_ = json.Unmarshal(raw, &in)
		ex.mu.Lock()
		tx := ex.tx
		if tx == nil || in.Tx == nil || *in.Tx != tx.ID {
			ex.mu.Unlock()
			return nil, ToolError("pass { tx } of the open transaction (begin returns it)")
		}
		ex.tx = nil
		if name == "rollback" {
			// The Result waits for a rollback that outlives the run.
			ex.settling.Add(1)
			defer ex.settling.Done()
		}
		ex.mu.Unlock()
		stragglers := ex.closeTx(tx, name == "rollback")
		if name == "commit" {
			return map[string]int{"committed": len(tx.Done)}, nil
		}
		undone, problems := ex.compensate(ex.doneSteps(tx), stragglers)
		if len(problems) > 0 {
			return nil, ToolError("the rollback is incomplete: " + strings.Join(problems, "; "))
		}
		return map[string][]string{"rolledBack": undone}, nil
	}
}

func (ex *execution) openTx(index int, touches []string) (any, error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.tx != nil {
		return nil, ToolError(fmt.Sprintf("transaction %d is open already: commit or roll it back first", ex.tx.ID))
	}
	ex.tx = &transaction{ID: index, Touches: touches}
	return map[string]int{"tx": index}, nil
}

// closeTx ends a transaction: no call joins it any more, and with
// rollback none of its calls that has not started will. It waits for the
// calls of it still running, until the run's grace ends, and returns how
// many were still running then.
func (ex *execution) closeTx(tx *transaction, rollback bool) (stragglers int) {
	ex.mu.Lock()
	if ex.tx == tx {
		ex.tx = nil
	}
	tx.ending = true
	if rollback {
		tx.rolledBack = true
		ex.rolledBack = append(ex.rolledBack, tx.ID)
	}
	if tx.running == 0 {
		ex.mu.Unlock()
		return 0
	}
	drained := make(chan struct{})
	tx.drained = drained
	ex.mu.Unlock()
	select {
	case <-drained:
		return 0
	case <-ex.grace.Done():
		ex.mu.Lock()
		defer ex.mu.Unlock()
		return tx.running
	}
}

// doneSteps is a snapshot of a transaction's completed calls.
func (ex *execution) doneSteps(tx *transaction) []txStep {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return slices.Clone(tx.Done)
}

// compensate undoes completed calls, latest first, within
// CompensationGrace, and records each compensation in the audit. It
// returns the tools undone and what was not, stragglers (calls still
// running when the transaction was closed) included.
func (ex *execution) compensate(steps []txStep, stragglers int) (undone, problems []string) {
	grace := ex.rt.opts.CompensationGrace
	switch {
	case stragglers == 1:
		problems = append(problems, fmt.Sprintf("1 of its calls was still running after %v, so whether it took effect is unknown", grace))
	case stragglers > 1:
		problems = append(problems, fmt.Sprintf("%d of its calls were still running after %v, so whether they took effect is unknown", stragglers, grace))
	}
	for i := len(steps) - 1; i >= 0; i-- {
		step := steps[i]
		entry := ex.rt.index[pathKey(step.Path)]
		if entry == nil || entry.tool.Compensate == nil {
			problems = append(problems, step.Name+" cannot be undone (it has no compensation)")
			continue
		}
		start := time.Now()
		undo := withCall(ex.ctx, Call{Index: step.Index, Name: step.Name, Path: step.Path, Input: step.Input,
			Annotations: entry.tool.Annotations, RunID: ex.runID, Session: ex.session, Compensating: true})
		err := compensateWithin(undo, grace, entry.tool.Compensate, step.Input, step.Output)
		call := ToolCall{Name: step.Name + "#compensate", Outcome: OutcomeOK, StartMs: ex.sinceStart(start), DurationMs: time.Since(start).Milliseconds()}
		switch {
		case errors.Is(err, errAbandoned):
			call.Outcome = OutcomeError
			problems = append(problems, fmt.Sprintf("%s was not undone: its compensation did not finish within %v and was abandoned, so whether it took effect is unknown", step.Name, grace))
		case err != nil:
			call.Outcome = OutcomeError
			problems = append(problems, step.Name+" was not undone: "+publicMessage(err))
		default:
			undone = append(undone, step.Name)
		}
		ex.mu.Lock()
		ex.calls = append(ex.calls, call)
		ex.admitted++
		ex.mu.Unlock()
	}
	return undone, problems
}

// errAbandoned: a compensation did not return before its context ended.
var errAbandoned = errors.New("abandoned")

// compensateWithin runs a compensation for at most grace (its context
// keeps runCtx's values, not its end), turning a panic into an error; it
// stops waiting for one that ignores its context, as a tool that does is
// not waited for.
func compensateWithin(runCtx context.Context, grace time.Duration, f func(context.Context, json.RawMessage, json.RawMessage) error, input, output json.RawMessage) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), grace)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("compensation panicked: %v", p)
			}
		}()
		done <- f(ctx, input, output)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return errAbandoned
	}
}

// endTx settles a transaction still open when the run ended: a failed run
// rolls it back (the report joins the diagnostic), a good one commits it.
func (ex *execution) endTx(res *Result) {
	ex.mu.Lock()
	tx := ex.tx
	ex.mu.Unlock()
	if tx == nil {
		return
	}
	if res.OK {
		ex.closeTx(tx, false)
		return
	}
	stragglers := ex.closeTx(tx, true)
	ex.mu.Lock()
	before := len(ex.calls)
	ex.mu.Unlock()
	steps := ex.doneSteps(tx)
	undone, problems := ex.compensate(steps, stragglers)
	note := fmt.Sprintf("the open transaction was rolled back (%d of %d calls undone)", len(undone), len(steps))
	if len(problems) > 0 {
		note += "; the rollback is incomplete: " + strings.Join(problems, "; ")
	}
	if res.Error != nil {
		res.Error.Message += "; " + note
	}
	ex.txNote = note
	ex.mu.Lock()
	res.ToolCalls = append(res.ToolCalls, ex.calls[before:]...)
	ex.mu.Unlock()
}

// callError is a failed call's kind and message, for admission.
type callError struct {
	kind Kind
	msg  string
}

func (e *callError) Error() string { return e.msg }
