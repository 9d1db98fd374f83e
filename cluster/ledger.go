package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/codemode-go/codemode"
	"github.com/nats-io/nats.go/jetstream"
)

// An entry of the effect ledger: what became of one side-effecting call
// of a run. A worker claims the call (creates the entry) before it makes
// it, and records its result after; a worker that takes over a run finds
// each call done (its result is delivered, the call is not made again),
// claimed (the call may or may not have happened: in doubt) or absent
// (never made).
type entry struct {
	State string `json:"state"` // claimed, done, unknown
	// Sum is a digest of the call's tool and input: a takeover whose
	// replay made another call at the same index does not get this one's
	// result.
	Sum    string          `json:"sum"`
	By     string          `json:"by"`
	Output json.RawMessage `json:"output,omitempty"`
	// Error is the message the program saw for a failed call; Safe says
	// it was a ToolError's (shown as is) rather than "Tool execution
	// failed".
	Error string `json:"error,omitempty"`
	Safe  bool   `json:"safe,omitempty"`
	// Denied is the reason a call was refused.
	Denied string `json:"denied,omitempty"`
}

const (
	claimed = "claimed"
	done    = "done"
	unknown = "unknown"
)

func ledgerKey(runID string, index int) string {
	return "c." + runID + "." + strconv.Itoa(index)
}

func callSum(c codemode.PendingCall) string {
	h := sha256.New()
	h.Write([]byte(strings.Join(c.Path, "\x00")))
	h.Write([]byte{0})
	h.Write(c.Input)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// idempotencyKey is in the contexts of the calls a worker makes.
type idempotencyKey struct{}

// IdempotencyKey returns the key of the tool call ctx belongs to, when a
// cluster worker makes it: the run's id and the call's index, the same
// for every attempt at the call, so that a tool that passes it on (as an
// Idempotency-Key header, say) lets its service drop a repeat. Only calls
// of tools annotated idempotent are ever repeated, and only when a worker
// died not knowing whether the call happened.
func IdempotencyKey(ctx context.Context) (string, bool) {
	if key, ok := ctx.Value(remoteKey{}).(string); ok {
		return key, true // a front running a worker's call (ServeTools)
	}
	run, ok := ctx.Value(idempotencyKey{}).(string)
	if !ok {
		return "", false
	}
	c, ok := codemode.CallFrom(ctx)
	if !ok {
		return "", false
	}
	return run + "/" + strconv.Itoa(c.Index), true
}

// claim judges one held call of run id by the ledger: a call never
// claimed is claimed now, to be made (make is true, rev the claim's
// revision); a call recorded done gets its recorded result; a call
// claimed and not recorded is in doubt, and is made again only when its
// tool is annotated idempotent, else the program is told its outcome is
// unknown.
//
// doubtful reports a call in doubt (claimed, never recorded, not
// idempotent), whose entry is at revision rev: with
// WorkerOptions.AskInDoubt a person decides whether it is made again.
func (w *Worker) claim(ctx context.Context, id string, c codemode.PendingCall) (res codemode.CallResult, make bool, rev uint64, doubtful bool) {
	key, sum := ledgerKey(id, c.Index), callSum(c)
	// Creating first: a call is new far more often than not.
	rev, err := w.node.led.Create(ctx, key, mustJSON(entry{State: claimed, Sum: sum, By: w.node.cfg.Name}))
	switch {
	case err == nil:
		return codemode.CallResult{}, true, rev, false
	case !errors.Is(err, jetstream.ErrKeyExists):
		return codemode.CallResult{Index: c.Index, Err: fmt.Errorf("cluster: claiming the call in the ledger: %w", err)}, false, 0, false
	}
	e, rev, err := getJSON[entry](ctx, w.node.led, key)
	switch {
	case err != nil:
		return codemode.CallResult{Index: c.Index, Err: fmt.Errorf("cluster: reading the ledger: %w", err)}, false, 0, false
	case e.Sum != sum:
		return doubt(c, "after this run's worker stopped, the run was taken over and made another call in this one's place"), false, 0, false
	case e.State == done:
		return e.result(c.Index), false, 0, false
	case e.State == claimed && c.Annotations != nil && c.Annotations.Idempotent:
		// Made again with the same idempotency key: the tool says a
		// repeat does nothing more.
		return codemode.CallResult{}, true, rev, false
	}
	if e.State == claimed {
		// Every later taker says the same.
		e.State = unknown
		if r, err := w.node.led.Update(ctx, key, mustJSON(e), rev); err == nil {
			rev = r
		}
	}
	return doubt(c, "the worker making it stopped before it reported back, and the tool is not annotated idempotent, so it was not made again"), false, rev, true
}

// doubtQuestion is what a person is asked about a call in doubt.
const doubtQuestion = "The worker making this call stopped before it reported back: it may or may not have happened. Make it again?"

// reclaim takes a call in doubt, at revision rev of its entry, for this
// worker to make again (a person allowed it); false when another took it.
func (w *Worker) reclaim(ctx context.Context, id string, c codemode.PendingCall, rev uint64) (uint64, bool) {
	r, err := w.node.led.Update(ctx, ledgerKey(id, c.Index), mustJSON(entry{State: claimed, Sum: callSum(c), By: w.node.cfg.Name}), rev)
	return r, err == nil
}

func doubt(c codemode.PendingCall, why string) codemode.CallResult {
	return codemode.CallResult{Index: c.Index, Err: codemode.ToolErrorf(
		"the outcome of %s is unknown: it may or may not have happened (%s)", strings.Join(c.Path, "."), why)}
}

// make makes a claimed call and records its result.
func (w *Worker) make(ctx context.Context, rt *codemode.Runtime, id string, c codemode.PendingCall, rev uint64) codemode.CallResult {
	key, sum := ledgerKey(id, c.Index), callSum(c)
	res := rt.RunPending(context.WithValue(ctx, idempotencyKey{}, id), c)
	e := entry{State: done, Sum: sum, By: w.node.cfg.Name, Output: res.Output}
	if res.Err != nil {
		e.Output = nil
		e.Error, e.Safe = codemode.ToolErrorMessage(res.Err)
		if !e.Safe {
			e.Error = "the call failed" // the program is shown no more
		}
	}
	// The result is recorded even if this worker lost the run meanwhile:
	// the call was made, and whoever holds the run now should know.
	if _, err := w.node.led.Update(context.WithoutCancel(ctx), key, mustJSON(e), rev); err != nil {
		w.log.Warn("recording a call's result in the ledger failed", "run", id, "call", c.Index, "error", err)
	}
	return res
}

func (e entry) result(index int) codemode.CallResult {
	r := codemode.CallResult{Index: index, Output: e.Output, Denied: e.Denied}
	if e.Error != "" {
		if e.Safe {
			r.Err = codemode.ToolError(e.Error)
		} else {
			r.Err = errors.New(e.Error)
		}
	}
	return r
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled here
	}
	return b
}

// undoOnce wraps the compensations of tools (Tool.Compensate, run when a
// program's transaction is rolled back) so that a run undoes each call at
// most once across workers. A rollback happens inside a step, so a worker
// that takes a run over replays it from the last checkpoint; the
// compensation is claimed in the ledger (under its call's key, with
// ".undo") before it runs and recorded after, and the replay finds it
// done (and does not run it again), or claimed and never recorded (it may
// or may not have happened: reported as not undone, with why).
func undoOnce(n *Node, tools codemode.Tools) codemode.Tools {
	return remap(tools, nil, func(_ []string, t codemode.Tool) codemode.Tool {
		if t.Compensate == nil {
			return t
		}
		undo := t.Compensate
		t.Compensate = func(ctx context.Context, in, out json.RawMessage) error {
			run, _ := ctx.Value(idempotencyKey{}).(string)
			c, ok := codemode.CallFrom(ctx)
			if run == "" || !ok || !c.Compensating {
				return undo(ctx, in, out)
			}
			key := ledgerKey(run, c.Index) + ".undo"
			rev, err := n.led.Create(ctx, key, mustJSON(entry{State: claimed, By: n.cfg.Name}))
			switch {
			case errors.Is(err, jetstream.ErrKeyExists):
				e, _, err := getJSON[entry](ctx, n.led, key)
				if err != nil {
					return fmt.Errorf("cluster: reading the ledger: %w", err)
				}
				switch {
				case e.State == done && e.Error == "":
					return nil
				case e.State == done:
					return codemode.ToolError(e.Error)
				}
				return codemode.ToolError("whether it was undone is unknown: the worker undoing it stopped before it reported back, and it was not undone again")
			case err != nil:
				return fmt.Errorf("cluster: claiming the compensation in the ledger: %w", err)
			}
			uerr := undo(ctx, in, out)
			e := entry{State: done, By: n.cfg.Name}
			if uerr != nil {
				if msg, safe := codemode.ToolErrorMessage(uerr); safe {
					e.Error = msg
				} else {
					e.Error = "its compensation failed"
				}
			}
			if _, err := n.led.Update(context.WithoutCancel(ctx), key, mustJSON(e), rev); err != nil && uerr == nil {
				return fmt.Errorf("cluster: recording the compensation in the ledger: %w", err)
			}
			return uerr
		}
		return t
	})
}
