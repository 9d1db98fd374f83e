package codemode

import (
	"context"
	"encoding/json"
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
// While it is open, only the declared tools may be called, and a policy
// is asked once, about the begin call (CallRequest.Name
// "$codemode.begin", its input the touched set), instead of about each
// call. When the run fails or times out with the transaction open, or the
// program calls tools.$codemode.rollback({ tx }), the calls that completed
// in it are compensated in reverse order (Tool.Compensate), each recorded
// in the audit as "<tool>#compensate" with its outcome. A run that ends
// well with a transaction open commits it.

// transaction is an open transaction of a run.
type transaction struct {
	ID      int      `json:"id"` // the begin call's audit index
	Touches []string `json:"touches"`
	Done    []txStep `json:"done,omitempty"` // completed calls, in completion order
}

type txStep struct {
	Index  int             `json:"index"`
	Name   string          `json:"name"`
	Path   []string        `json:"path"`
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
}

// compensationTimeout bounds the compensations of a run that ended.
const compensationTimeout = 30 * time.Second

// The transaction built-ins, below SearchNamespace.
var txTools = []string{"begin", "commit", "rollback"}

func isTxTool(path []string) bool {
	return len(path) == 2 && path[0] == SearchNamespace && slices.Contains(txTools, path[1])
}

// parseTouches reads begin's input: the names of tools of the Runtime.
func (rt *Runtime) parseTouches(raw json.RawMessage) ([]string, error) {
	var in struct {
		Touches []string `json:"touches"`
	}
	if err := json.Unmarshal(raw, &in); err != nil || len(in.Touches) == 0 {
		return nil, fmt.Errorf(`pass { touches: ["<namespace>.<tool>", ...] }: the tools the transaction may call`)
	}
	for _, name := range in.Touches {
		if rt.byName[name] == nil {
			return nil, fmt.Errorf("%q is not a tool", name)
		}
	}
	return in.Touches, nil
}

// txCheck is what an open transaction says of a call of a host tool:
// refused when outside the touched set, and allowed without asking the
// policy when inside.
func (ex *execution) txCheck(name string, path []string) (inTx bool, err error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.tx == nil {
		return false, nil
	}
	if !slices.Contains(ex.tx.Touches, name) {
		return false, &callError{kind: ToolFailure, msg: fmt.Sprintf("%s is not in the open transaction's touched set (%s); commit it first, or declare it in begin",
			jsPath(path), strings.Join(ex.tx.Touches, ", "))}
	}
	return true, nil
}

// txRecord records a completed call in the open transaction.
func (ex *execution) txRecord(index int, name string, path []string, input, output json.RawMessage) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.tx != nil && index > ex.tx.ID {
		ex.tx.Done = append(ex.tx.Done, txStep{Index: index, Name: name, Path: path, Input: input, Output: output})
	}
}

// txTool serves begin, commit and rollback.
func (ex *execution) txTool(name string, index int) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		switch name {
		case "begin":
			touches, err := ex.rt.parseTouches(raw)
			if err != nil {
				return nil, ToolError(err.Error())
			}
			return ex.openTx(index, touches)
		case "commit", "rollback":
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
			ex.mu.Unlock()
			if name == "commit" {
				return map[string]int{"committed": len(tx.Done)}, nil
			}
			undone, problems := ex.compensate(ctx, tx)
			if len(problems) > 0 {
				return nil, ToolError("the rollback is incomplete: " + strings.Join(problems, "; "))
			}
			return map[string][]string{"rolledBack": undone}, nil
		}
		return nil, ToolError("no such transaction tool")
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

// compensate undoes a transaction's completed calls, latest first, and
// records each compensation in the audit. It returns the tools undone and
// what could not be.
func (ex *execution) compensate(ctx context.Context, tx *transaction) (undone, problems []string) {
	for i := len(tx.Done) - 1; i >= 0; i-- {
		step := tx.Done[i]
		entry := ex.rt.index[pathKey(step.Path)]
		if entry == nil || entry.tool.Compensate == nil {
			problems = append(problems, step.Name+" cannot be undone (it has no compensation)")
			continue
		}
		start := time.Now()
		err := callCompensate(ctx, entry.tool.Compensate, step.Input, step.Output)
		call := ToolCall{Name: step.Name + "#compensate", Outcome: OutcomeOK, DurationMs: time.Since(start).Milliseconds()}
		if err != nil {
			call.Outcome = OutcomeError
			problems = append(problems, step.Name+" was not undone: "+publicMessage(err))
		} else {
			undone = append(undone, step.Name)
		}
		ex.mu.Lock()
		ex.calls = append(ex.calls, call)
		ex.admitted++
		ex.mu.Unlock()
	}
	return undone, problems
}

// callCompensate runs a compensation, turning a panic into an error.
func callCompensate(ctx context.Context, f func(context.Context, json.RawMessage, json.RawMessage) error, input, output json.RawMessage) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("compensation panicked: %v", p)
		}
	}()
	return f(ctx, input, output)
}

// endTx settles a transaction still open when the run ended: a failed run
// rolls it back (the report joins the diagnostic), a good one commits it.
func (ex *execution) endTx(res *Result) {
	ex.mu.Lock()
	tx := ex.tx
	ex.tx = nil
	ex.mu.Unlock()
	if tx == nil || res.OK {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ex.ctx), compensationTimeout)
	defer cancel()
	ex.mu.Lock()
	before := len(ex.calls)
	ex.mu.Unlock()
	undone, problems := ex.compensate(ctx, tx)
	note := fmt.Sprintf("the open transaction was rolled back (%d of %d calls undone)", len(undone), len(tx.Done))
	if len(problems) > 0 {
		note += "; the rollback is incomplete: " + strings.Join(problems, "; ")
	}
	if res.Error != nil {
		res.Error.Message += "; " + note
	}
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
