package codemode

import (
	"context"
	"errors"
	"fmt"

	"github.com/codemode-go/codemode/internal/sandbox"
)

// A run's life.
//
// Every run — Execute, a cell, ExecuteSuspendable, Resume — lives the
// same way; only how it is prepared differs:
//
//	enter    the Runtime takes the run (or refuses it once closed), and
//	         its telemetry starts
//	prepare  the program is checked and compiled, or a state is opened
//	         and its results delivered, and the sandbox drives the run
//	         until it ends or waits for held calls
//	step     a run that waits becomes a state (step); one that ended
//	         becomes its Result (finish)
//
// A tool call has one path too: admit (admit.go) decides it, perform
// gives it a concurrency slot and reports it, and invoke runs the tool;
// RunPending invokes a pending call the same way.

// prepare readies a run once the Runtime has it. early, when set, is the
// Result of a run that ended before it reached the engine (it did not
// compile, or its state was refused), with err.
type prepare func(runCtx context.Context) (ex *execution, sr sandbox.Result, h stateHeader, early *Result, err error)

// live runs one run, or one step of a suspendable run, from enter to its
// end. started, when not nil, is closed once the Runtime has taken the
// run or refused it.
func (rt *Runtime) live(ctx context.Context, code string, started chan struct{}, prep prepare) (Result, *Suspended, error) {
	ctx, tel := rt.traceStep(ctx, code)
	runCtx, done, err := rt.enter(ctx)
	if started != nil {
		close(started)
	}
	if err != nil {
		return tel.end(Result{ToolCalls: []ToolCall{}}, nil, err)
	}
	defer done()
	// A tool that runs a program on a Runtime (this one or another)
	// nests runs; a program that calls that tool again would nest
	// without end, each level holding its memory and a run slot.
	depth, _ := ctx.Value(nestKey{}).(int)
	if depth >= MaxNesting {
		return tel.end(Result{ToolCalls: []ToolCall{}, Error: &Diagnostic{Kind: ExecutionFailure, Message: fmt.Sprintf(
			"the program did not run: runs are nested %d deep (a tool runs a program that calls a tool that runs a program...); at most %d are allowed", depth+1, MaxNesting)}}, nil, nil)
	}
	runCtx = context.WithValue(runCtx, nestKey{}, depth+1)
	ex, sr, h, early, err := prep(runCtx)
	if early != nil {
		return tel.end(*early, nil, rt.interruption(ctx, runCtx, err))
	}
	return tel.end(rt.step(ctx, runCtx, ex, sr, h))
}

// stepTelemetry records one step of a suspendable run, when the Runtime
// has telemetry.
type stepTelemetry struct{ r *runTelemetry }

func (rt *Runtime) traceStep(ctx context.Context, code string) (context.Context, stepTelemetry) {
	if rt.tel == nil {
		return ctx, stepTelemetry{}
	}
	ctx, r := rt.tel.startRun(ctx, code)
	return ctx, stepTelemetry{r}
}

func (t stepTelemetry) end(res Result, s *Suspended, err error) (Result, *Suspended, error) {
	if t.r != nil {
		t.r.endStep(res, s != nil, err)
	}
	return res, s, err
}

// MaxNesting is how deep runs may nest: a run whose tool runs a program
// (Execute, on any Runtime, from the tool's context) is one level, and a
// run past MaxNesting levels fails with an ExecutionFailure instead of
// running.
const MaxNesting = 4

type nestKey struct{}

// enter registers a run with the Runtime: its context ends when ctx does
// or Close stops it; done must follow.
func (rt *Runtime) enter(ctx context.Context) (context.Context, func(), error) {
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return nil, nil, ErrClosed
	}
	rt.runs.Add(1)
	rt.mu.Unlock()
	runCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(rt.closing, func() { cancel(ErrStopped) })
	return runCtx, func() {
		stop()
		cancel(nil)
		rt.runs.Done()
	}, nil
}

// interruption names why a run was interrupted: ErrStopped when Close
// stopped it, else ctx's error.
func (rt *Runtime) interruption(ctx, runCtx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(context.Cause(runCtx), ErrStopped) {
		return ErrStopped
	}
	if e := ctx.Err(); e != nil {
		return e
	}
	return err
}
