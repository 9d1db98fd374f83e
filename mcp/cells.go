package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

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
    },
    "maxTokens": {
      "type": "integer",
      "minimum": 1,
      "description": "Hold this answer's value and logs to about this many tokens; lines of a running program that do not fit wait for the next wait."
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
    "terminate": {"type": "boolean", "description": "Stop the program now: the answer is what it had done (its tool calls and lines) with ok false."},
    "maxTokens": {"type": "integer", "minimum": 1, "description": "Hold the answer's value and logs to about this many tokens. While the program runs, lines that do not fit are kept for the next wait (heldLines counts them); its final result is cut, with a marker."}
  },
  "required": ["cellId"],
  "additionalProperties": false
}`)

func waitToolDef() *mcpsdk.Tool {
	return &mcpsdk.Tool{
		Name:        WaitTool,
		Title:       "Collect a running program's output",
		Description: "Wait for a program that execute left running (it answered with running: true and a cellId): returns what it printed since, and its result once it has ended. Call it again while running is true. Pass terminate: true to stop it instead; the answer says what it had done. Pass maxTokens to hold the answer to about that many tokens: while the program runs, the lines that do not fit are kept, heldLines says how many, and the next wait returns them first (a line longer than the whole budget comes in parts); a final result over it is cut, with a marker and truncated: true.",
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
	props["heldLines"] = map[string]any{"type": "integer", "description": "Lines printed that did not fit maxTokens: the next wait returns them first."}
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
	budget, problem := maxTokensArg(args)
	if problem != "" {
		return codemode.Result{Error: &codemode.Diagnostic{Kind: codemode.ParseError, Message: problem},
			ToolCalls: []codemode.ToolCall{}}, nil, nil
	}
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
	res, running, err := s.collect(ctx, id, yield, true, budget)
	if running == nil {
		s.untrackCell(session, id)
	}
	return res, running, err
}

// collect waits up to timeout for a cell and answers with its Result, or
// with the running answer and the lines it printed meanwhile. first marks
// execute's own wait: a request that ends then cancels the cell, whose id
// the client never got. budget (bytes, 0 for none) holds the answer to a
// maxTokens: the lines of a running cell that do not fit are held back
// for the next wait, which answers with them first.
func (s *Server) collect(ctx context.Context, id string, timeout time.Duration, first bool, budget int) (codemode.Result, *mcpsdk.CallToolResult, error) {
	session := s.sessionOf(ctx)
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
			switch {
			case first:
				_ = s.cellTab.cancel(ctx, id)
				s.held.drop(session, id)
			case errors.Is(err, codemode.ErrNoCell):
				s.held.drop(session, id)
			default:
				// The request ended: the lines it collected wait for the next.
				s.held.add(session, id, logs, s.heldAge())
			}
			return codemode.Result{ToolCalls: []codemode.ToolCall{}}, nil, err
		}
		logs = append(logs, u.Logs...)
		if u.Done {
			res := *u.Result
			if held := s.held.take(session, id); !first || held != nil {
				// The model saw the earlier lines in earlier answers, but
				// not those held back from them.
				res.Logs = append(held, logs...)
			}
			if budget > 0 {
				res = res.Fit(budget, "maxTokens")
			}
			return res, nil, u.Err
		}
	}
	logs = append(s.held.take(session, id), logs...)
	var held []string
	if budget > 0 {
		logs, held = fitLines(logs, budget)
		s.held.add(session, id, held, s.heldAge())
	}
	out := map[string]any{"ok": false, "running": true, "cellId": id, "logs": logs, "toolCalls": []any{}}
	if logs == nil {
		out["logs"] = []string{}
	}
	if len(held) > 0 {
		out["heldLines"] = len(held)
	}
	b, _ := json.Marshal(out)
	return codemode.Result{}, &mcpsdk.CallToolResult{
		Content:           []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}, nil
}

// fitLines splits lines into those that fit budget bytes, from the oldest
// (a line costs its length and a newline, as in a Result's output
// budget), and those held back. A first line longer than the whole budget
// is split: its first part goes now, the rest is held, so that every
// answer makes progress.
func fitLines(lines []string, budget int) (fit, held []string) {
	for i, l := range lines {
		if len(l)+1 <= budget {
			budget -= len(l) + 1
			continue
		}
		if i > 0 {
			return lines[:i], lines[i:]
		}
		n := max(budget-1, 1)
		for n > 0 && !utf8.RuneStart(l[n]) {
			n--
		}
		if n == 0 {
			_, n = utf8.DecodeRuneInString(l) // at least one character
		}
		return []string{l[:n]}, append([]string{l[n:]}, lines[1:]...)
	}
	return lines, nil
}

// maxTokensArg reads the optional maxTokens argument of execute and wait:
// its budget in bytes (codemode.BytesPerToken a token; 0 when absent), or
// what is wrong with it, for the model.
func maxTokensArg(args json.RawMessage) (int, string) {
	var in struct {
		MaxTokens json.RawMessage `json:"maxTokens"`
	}
	if json.Unmarshal(args, &in) != nil || in.MaxTokens == nil || string(in.MaxTokens) == "null" {
		return 0, ""
	}
	var n float64
	if err := json.Unmarshal(in.MaxTokens, &n); err != nil || n < 1 || n != math.Trunc(n) {
		return 0, fmt.Sprintf("maxTokens must be a whole number of at least 1, not %s: the answer's value and logs are held to about that many tokens", in.MaxTokens)
	}
	n = min(n, math.MaxInt32/codemode.BytesPerToken)
	return int(n) * codemode.BytesPerToken, ""
}

// heldLines keeps the lines of running cells that a wait's maxTokens
// held back, by session and cell id, until a later wait answers with
// them. The cell's own limits bound them (its output budget bounds its
// lines); they go when the cell's Result is collected, when it is found
// gone, when its session ends, or once nobody has waited for it for as
// long as a cell lives idle.
type heldLines struct {
	mu sync.Mutex
	m  map[heldKey]heldEntry
}

type heldKey struct{ session, id string }

type heldEntry struct {
	lines []string
	at    time.Time // when they were held back
}

// add holds lines back after those already held, and forgets entries
// older than maxAge (cells that expired).
func (h *heldLines) add(session, id string, lines []string, maxAge time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for k, e := range h.m {
		if now.Sub(e.at) > maxAge {
			delete(h.m, k)
		}
	}
	if len(lines) == 0 {
		return
	}
	if h.m == nil {
		h.m = map[heldKey]heldEntry{}
	}
	k := heldKey{session, id}
	h.m[k] = heldEntry{lines: append(slices.Clip(h.m[k].lines), lines...), at: now}
}

// has reports whether a cell has lines held back.
func (h *heldLines) has(session, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.m[heldKey{session, id}]
	return ok
}

// take returns a cell's held lines and forgets them.
func (h *heldLines) take(session, id string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := heldKey{session, id}
	e := h.m[k]
	delete(h.m, k)
	return slices.Clone(e.lines)
}

// drop forgets a cell's held lines.
func (h *heldLines) drop(session, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, heldKey{session, id})
}

// dropSession forgets the held lines of a session's cells.
func (h *heldLines) dropSession(session string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.m {
		if k.session == session {
			delete(h.m, k)
		}
	}
}

// heldAge is how long held lines outlive the last wait: a cell nobody
// waits for expires after its idle timeout.
func (s *Server) heldAge() time.Duration {
	if d := s.opts.CellOptions.IdleTimeout; d > 0 {
		return d
	}
	return codemode.DefaultCellIdleTimeout
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
	budget, problem := maxTokensArg(req.Params.Arguments)
	if problem != "" {
		return toolResult(codemode.Result{Error: &codemode.Diagnostic{Kind: codemode.ParseError, Message: problem},
			ToolCalls: []codemode.ToolCall{}}), nil
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
	if s.held.has(s.sessionOf(ctx), in.CellID) {
		// Lines held back are ready: answer with them, and what is new,
		// now.
		timeout = time.Millisecond
	}
	if in.Terminate {
		// Stopped, the run ends within moments (a tool that ignores its
		// context is abandoned); the wait collects its partial Result.
		if err := s.cellTab.cancel(ctx, in.CellID); err == nil {
			timeout = max(timeout, terminateWait)
		}
	}
	res, running, err := s.collect(ctx, in.CellID, timeout, false, budget)
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
