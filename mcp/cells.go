package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// WaitTool is the name of the tool that collects a running cell's output
// (ServerOptions.Cells).
const WaitTool = "wait"

// cellsDescription ends the execute tool's description when cells are on.
const cellsDescription = `

## Long runs

Pass ` + "`yieldMs`" + ` (or start the program with ` + "`// @exec: yield=5s`" + `) to get an answer after that long even if the program is still running: the answer is then ` + "`{\"running\": true, \"cellId\": \"...\", \"logs\": [...]}`" + `, the program goes on, and ` + "`wait({ cellId })`" + ` returns what it printed since, and its result once it ends. Print progress with console.log so each wait has something to show.
`

var executeCellInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "code": {
      "type": "string",
      "description": "The program: the body of an async function in JavaScript or TypeScript. Use await at the top level and return the value you need."
    },
    "yieldMs": {
      "type": "integer",
      "minimum": 0,
      "description": "Answer after this many milliseconds even if the program is still running; it goes on, and wait collects the rest."
    }
  },
  "required": ["code"],
  "additionalProperties": false
}`)

var waitInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "cellId": {"type": "string", "description": "The cellId an earlier answer gave."},
    "timeoutMs": {"type": "integer", "minimum": 0, "description": "Answer after this long even if the program is still running (default 30000)."},
    "terminate": {"type": "boolean", "description": "Stop the program now: the answer is what it had done (its tool calls and lines) with ok false."}
  },
  "required": ["cellId"],
  "additionalProperties": false
}`)

func waitToolDef() *mcpsdk.Tool {
	return &mcpsdk.Tool{
		Name:        WaitTool,
		Title:       "Collect a running program's output",
		Description: "Wait for a program that execute left running (it answered with running: true and a cellId): returns what it printed since, and its result once it has ended. Call it again while running is true. Pass terminate: true to stop it instead; the answer says what it had done.",
		InputSchema: waitInputSchema,
		// The same shape as execute's answers.
		OutputSchema: cellOutputSchema,
	}
}

// cellOutputSchema is execute's output schema with the running answer's
// fields.
var cellOutputSchema = func() json.RawMessage {
	var m map[string]any
	_ = json.Unmarshal(executeOutputSchema, &m)
	props := m["properties"].(map[string]any)
	props["running"] = map[string]any{"type": "boolean", "description": "The program is still running: call wait with cellId for the rest."}
	props["cellId"] = map[string]any{"type": "string", "description": "Names the running program for wait."}
	b, _ := json.Marshal(m)
	return b
}()

const defaultWaitTimeout = 30 * time.Second

// terminateWait is how long a wait that terminates its cell waits at
// least for the run to end.
const terminateWait = 10 * time.Second

// startCell runs a program as a cell for up to its yield time (yieldMs,
// else its pragma, else its whole run) and answers with its Result when it
// ended by then, or with the running answer. The run slot in *release
// passes to the cell, which gives it back when its run ends.
func (s *Server) startCell(ctx context.Context, rt *codemode.Runtime, args json.RawMessage, code string, release *func()) (codemode.Result, *mcpsdk.CallToolResult, error) {
	var in struct {
		YieldMs *int64 `json:"yieldMs"`
	}
	_ = json.Unmarshal(args, &in)
	yield := time.Duration(0)
	if p, err := codemode.ParsePragma(code); err == nil && p.Yield > 0 {
		yield = p.Yield
	}
	if in.YieldMs != nil {
		yield = time.Duration(*in.YieldMs) * time.Millisecond
	}
	if t := s.opts.Runtime.Timeout; yield <= 0 || (t > 0 && yield > t) {
		yield = t // no yield: as long as the run may take
	}
	id, err := s.cellTab.start(ctx, rt, code, *release)
	if err != nil {
		if errors.Is(err, codemode.ErrTooManyCells) {
			return codemode.Result{Error: &codemode.Diagnostic{Kind: codemode.ExecutionFailure, Message: err.Error()},
				ToolCalls: []codemode.ToolCall{}}, nil, nil
		}
		return codemode.Result{ToolCalls: []codemode.ToolCall{}}, nil, err
	}
	*release = nil // the cell has the slot now
	session := s.sessionOf(ctx)
	s.trackCell(session, id)
	res, running, err := s.collect(ctx, id, yield, true)
	if running == nil {
		s.untrackCell(session, id)
	}
	return res, running, err
}

// collect waits up to timeout for a cell and answers with its Result, or
// with the running answer and the lines it printed meanwhile. first marks
// execute's own wait: a request that ends then cancels the cell, whose id
// the client never got.
func (s *Server) collect(ctx context.Context, id string, timeout time.Duration, first bool) (codemode.Result, *mcpsdk.CallToolResult, error) {
	deadline := time.Now().Add(timeout)
	var logs []string
	for {
		left := time.Until(deadline)
		if timeout <= 0 {
			left = 0 // until the end
		} else if left <= 0 {
			break
		}
		u, err := s.cellTab.wait(ctx, id, left)
		if err != nil {
			if first {
				_ = s.cellTab.cancel(ctx, id)
			}
			return codemode.Result{ToolCalls: []codemode.ToolCall{}}, nil, err
		}
		logs = append(logs, u.Logs...)
		if u.Done {
			res := *u.Result
			if !first {
				// The model saw the earlier lines in earlier answers.
				res.Logs = logs
			}
			return res, nil, u.Err
		}
	}
	out := map[string]any{"ok": false, "running": true, "cellId": id, "logs": logs, "toolCalls": []any{}}
	if logs == nil {
		out["logs"] = []string{}
	}
	b, _ := json.Marshal(out)
	return codemode.Result{}, &mcpsdk.CallToolResult{
		Content:           []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}, nil
}

// wait serves the wait tool.
func (s *Server) wait(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
	var in struct {
		CellID    string `json:"cellId"`
		TimeoutMs *int64 `json:"timeoutMs"`
		Terminate bool   `json:"terminate"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.CellID == "" {
		return toolResult(codemode.Result{Error: &codemode.Diagnostic{Kind: codemode.ParseError,
			Message: `pass {"cellId": "<the cellId execute answered with>"}`}, ToolCalls: []codemode.ToolCall{}}), nil
	}
	timeout := defaultWaitTimeout
	if in.TimeoutMs != nil {
		timeout = time.Duration(*in.TimeoutMs) * time.Millisecond
	}
	if timeout <= 0 {
		timeout = time.Millisecond
	}
	if req.Session != nil {
		// Only the session that started a cell can collect it, and its
		// user answers the questions of an executor's parked cell.
		ctx = context.WithValue(ctx, sessionCtxKey{}, req.Session)
		ctx = codemode.WithSession(ctx, s.sessionName(req.Session))
		s.watch(req.Session)
	}
	if in.Terminate {
		// Stopped, the run ends within moments (a tool that ignores its
		// context is abandoned); the wait collects its partial Result.
		if err := s.cellTab.cancel(ctx, in.CellID); err == nil {
			timeout = max(timeout, terminateWait)
		}
	}
	res, running, err := s.collect(ctx, in.CellID, timeout, false)
	if in.Terminate && running == nil && !errors.Is(err, codemode.ErrNoCell) && !res.OK && res.Error == nil {
		// An interruption has no diagnostic of its own; say what it was.
		res.Error = &codemode.Diagnostic{Kind: codemode.ExecutionFailure,
			Message: "the program was stopped (wait with terminate): toolCalls and logs show what it had done"}
	}
	if running == nil && req.Session != nil {
		s.untrackCell(s.sessionName(req.Session), in.CellID)
	}
	switch {
	case running != nil:
		return running, nil
	case errors.Is(err, codemode.ErrNoCell):
		return toolResult(codemode.Result{Error: &codemode.Diagnostic{Kind: codemode.ExecutionFailure,
			Message: "no running program has cellId " + in.CellID + ": its result was collected already, or it expired"},
			ToolCalls: []codemode.ToolCall{}}), nil
	}
	return toolResult(res), nil
}
