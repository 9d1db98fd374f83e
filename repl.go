package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/codemode-go/codemode/internal/envelope"
	"github.com/codemode-go/codemode/internal/guest"
	"github.com/codemode-go/codemode/internal/sandbox"
)

// REPL sessions.
//
// Execute runs each program in a fresh engine: nothing it declared is
// there for the next. ExecuteREPL runs programs as the cells of a
// session, as in a notebook: a cell is a script whose top-level
// declarations (const, let, function, class) live on for the cells after
// it, and whose value is its last expression's. Between cells the
// session is its engine heap, kept as a state of the same form as a
// suspended run's (signed with StateKey), so the host can keep it
// anywhere — in memory, on disk, on another machine with the same engine
// build — and a restart loses nothing.

// replKind is the envelope of a REPL session's state; a suspended run's state
// (stateKind) is not one, nor the other way round.
var replKind = sealKind{magic: "CMREPL02", legacy: "CMREPL01"}

// replHeader is the Runtime's part of a REPL state.
type replHeader struct {
	Engine string `json:"engine"`
	// Cells counts the cells the heap has served.
	Cells   int             `json:"cells"`
	Session string          `json:"session,omitempty"`
	Sandbox json.RawMessage `json:"sandbox"`
}

// ExecuteREPL runs code as the next cell of the REPL session state (nil
// or empty: a new session) and returns its Result and the session's state
// after it, for the next cell. code is JavaScript run as a script: await
// works at its top level, its top-level declarations are visible to the
// cells after it, and its value is that of its last expression statement
// (a script cannot return). Declaring a name a cell before declared is a
// SyntaxError, as in any script; assign instead.
//
// Each cell has the Runtime's limits. A cell that fails by throwing
// keeps what it declared before the throw; one that times out, runs out
// of memory or is interrupted keeps nothing, and the state returned is
// the one given (the Result's last log line says so). The state is at
// most MaxStateBytes; a heap larger than that is not kept either, and the
// Result says so the same way.
//
// ExecuteREPL needs Options.StateKey (ErrNoStateKey). A state that is
// not this Runtime's (another key, damaged, over MaxStateBytes) fails
// with ErrStateInvalid, one made by another engine build with
// ErrStateEngine, one of another session (WithSession) with
// ErrStateInvalid; nothing runs then. The tools may change between
// cells: a cell sees the Runtime's tools.
func (rt *Runtime) ExecuteREPL(ctx context.Context, state []byte, code string) (Result, []byte, error) {
	none := Result{ToolCalls: []ToolCall{}}
	if len(rt.opts.StateKey) == 0 {
		return none, state, ErrNoStateKey
	}
	if rt.isClosed() {
		return none, state, ErrClosed
	}
	h := replHeader{Engine: enginebin.SHA256, Session: sessionOf(ctx)}
	var from *sandbox.State
	if len(state) > 0 {
		var err error
		if from, err = rt.openREPL(ctx, state, &h); err != nil {
			return none, state, err
		}
	}
	var sr sandbox.Result
	res, _, err := rt.live(ctx, code, nil, func(runCtx context.Context) (*execution, sandbox.Result, stateHeader, *Result, error) {
		ex, r, early, err := rt.startREPL(runCtx, code, from)
		sr = r
		return ex, r, stateHeader{}, early, err
	})
	next := state
	switch {
	case sr.Kept != nil:
		h.Cells++
		h.Sandbox = sr.Kept.Header
		sealed, serr := rt.sealREPL(&h, *sr.Kept)
		if serr == nil {
			next = sealed
			break
		}
		res.Logs = append(res.Logs, "[the session was not kept after this cell ("+serr.Error()+"): the next cell sees it as it was before this one]")
	case sr.KeepFailure != nil:
		res.Logs = append(res.Logs, "[the session was not kept after this cell ("+sr.KeepFailure.Message+"): the next cell sees it as it was before this one; keep less in global variables]")
	case err == nil && res.Error != nil && res.Error.Kind != ParseError && res.Error.Kind != UnsupportedSyntax:
		res.Logs = append(res.Logs, "[this cell did not end by itself, so nothing it declared was kept: the next cell sees the session as it was before this one]")
	}
	return res, next, err
}

// openREPL authenticates a REPL state and returns the sandbox's part,
// filling h from it.
func (rt *Runtime) openREPL(ctx context.Context, state []byte, h *replHeader) (*sandbox.State, error) {
	if int64(len(state)) > rt.opts.MaxStateBytes {
		return nil, fmt.Errorf("%w: it is %d bytes, over MaxStateBytes (%d)", ErrStateInvalid, len(state), rt.opts.MaxStateBytes)
	}
	var got replHeader
	snap, blocks, err := rt.open(state, replKind, &got)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateInvalid, err)
	}
	if got.Engine != enginebin.SHA256 {
		return nil, ErrStateEngine
	}
	if got.Session != sessionOf(ctx) {
		return nil, fmt.Errorf("%w: it is the state of another session", ErrStateInvalid)
	}
	*h = got
	return &sandbox.State{Header: got.Sandbox, Snapshot: snap, Blocks: blocks}, nil
}

// sealREPL writes a REPL state, at most MaxStateBytes.
func (rt *Runtime) sealREPL(h *replHeader, st sandbox.State) ([]byte, error) {
	head, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	if n := len(st.Snapshot) + envelope.Overhead(replKind.magic, len(head)); int64(n) > rt.opts.MaxStateBytes {
		return nil, &stateSizeError{n}
	}
	return rt.seal(st.Snapshot, snapshotSum(st), replKind, head), nil
}

// startREPL is start for a REPL cell: the program is compiled as a
// script in from's heap (a fresh one when nil), which the run keeps.
func (rt *Runtime) startREPL(ctx context.Context, code string, from *sandbox.State) (ex *execution, sr sandbox.Result, early *Result, err error) {
	var deadline time.Time
	if rt.opts.Timeout > 0 {
		deadline = time.Now().Add(rt.opts.Timeout)
	}
	if _, ok := rt.sb.(guest.Suspender); !ok {
		return nil, sr, &Result{ToolCalls: []ToolCall{}}, errNoSuspend
	}
	pragma, refused := precheck(code)
	if refused != nil {
		return nil, sr, refused, nil
	}
	// A cell runs as written: line n of the script is line n of the cell.
	src := &source{code: code, repl: true, prog: &guest.Program{Script: code, Locate: func(line, col int) (int, int, bool) {
		return line, col, line >= 1
	}}}
	lim := rt.limits()
	if n := pragma.OutputBytes; n > 0 && (lim.MaxOutputBytes == 0 || n < lim.MaxOutputBytes) {
		lim.MaxOutputBytes = n
	}
	ex = rt.newExecution(ctx, src, lim, false)
	ex.deadline = deadline
	req := ex.request(deadline)
	req.Program, req.Script, req.Keep, req.From = code, true, true, from
	req.Fallback = src.fallback // TypeScript, stripped with the cell kept a script
	req.MaxStateBytes = rt.opts.MaxStateBytes
	req.StateRoom = 1 << 10
	if sr, err = rt.sb.Run(ctx, req); err != nil {
		switch {
		case errors.Is(err, sandbox.ErrStateEngine):
			err = ErrStateEngine
		case errors.Is(err, sandbox.ErrStateMismatch), errors.Is(err, sandbox.ErrStateCorrupt):
			err = fmt.Errorf("%w: %w", ErrStateInvalid, err)
		}
		return nil, sr, &Result{Error: &Diagnostic{Kind: ExecutionFailure, Message: err.Error()}, ToolCalls: []ToolCall{}}, err
	}
	return ex, sr, nil, nil
}

// replReturn is the suggestion for a cell that returns at its top level.
const replReturn = "A REPL cell is a script, not a function body: end it with the expression whose value you want (`total` rather than `return total`)."

// isTopLevelReturn reports whether a compile failure is a return outside
// any function.
func isTopLevelReturn(message string) bool {
	return strings.Contains(message, "return not in a function")
}
