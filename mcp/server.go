package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/store"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ExecuteTool is the name of the one tool the server offers.
const ExecuteTool = "execute"

// ServerOptions configure [NewServer].
type ServerOptions struct {
	// Name and Version identify the server to clients. Empty means
	// "codemode" and "dev".
	Name, Version string

	// Runtime configures every run, as codemode.New takes it: its Tools are
	// the initial tool tree (SetTools replaces it) and its limits apply to
	// each execute call. Its zero values mean what they mean to codemode —
	// no time, tool-call or output limit — so a server facing a model
	// should set them; codemode.Options.WithUntrustedLimits sets the
	// preset codemode mcp uses.
	Runtime codemode.Options

	// Logger receives one record per run and the server's diagnostics.
	// Nil discards them. A stdio server must not log to standard output.
	Logger *slog.Logger

	// MaxRuns is the most execute runs in flight at once, across all
	// sessions and transports, but for the extra slots below; a call
	// over it waits for a slot. Each run
	// holds an engine instance (up to Runtime.MaxMemoryBytes) and CPU, so
	// without a cap a client that sends many calls at once takes the
	// whole machine. Zero means no limit; negative is an error.
	//
	// The slots are shared fairly among sessions: each session's calls
	// wait in a queue of their own, and a freed slot goes to the waiting
	// session that has used the least slot time lately (time held,
	// fading with a half-life of a minute; half a second for a session
	// none of whose runs has ended; ties to the call waiting longest). So
	// sessions take turns, and one whose programs run long (a loop that
	// runs to its timeout) waits behind the others instead of making them
	// wait. A session holds at most max(1, MaxRuns/2) slots while another
	// session holds or waits for one, and sessions that have used more
	// than a second lately hold at most MaxRuns - max(1, MaxRuns/4)
	// together (when MaxRuns > 1): the rest stay for sessions whose
	// programs end quickly. A running program keeps its slot, so beyond
	// MaxRuns there are max(1, MaxRuns/4) extra slots that only a
	// session known to be light may take (one of its runs has ended, and
	// it has used at most a second lately, its running programs
	// included): while loops hold every slot, programs that end quickly
	// still run at once. New sessions are not known to be light: new
	// sessions that all loop can hold every slot, once, for a run
	// timeout. A call that cannot get a slot — its request ends, it
	// waits RunWait, or its session already has MaxQueuedRuns calls
	// waiting — fails with an ExecutionFailure result saying why.
	MaxRuns int

	// MaxQueuedRuns is how many execute calls of one session may wait
	// for a run slot at once (with MaxRuns); one more fails at once. Zero
	// means DefaultMaxQueuedRuns; negative means no limit.
	MaxQueuedRuns int

	// RunWait is the longest an execute call waits for a run slot (with
	// MaxRuns) before it fails. Zero means DefaultRunWait or
	// Runtime.Timeout, whichever is shorter; negative means as long as
	// its request lasts.
	RunWait time.Duration

	// MaxSessions is the most sessions [Server.HTTPHandler] keeps at once.
	// A request that would open one more closes an idle session to make
	// room — one with no request being served and no run or cell in
	// flight: first one whose client holds no event stream open, then one
	// that never had a request after its initialization, then the least
	// recently used — whose client gets 404 on its next request and
	// starts a new session, as the protocol prescribes. Only when every
	// session is busy is it refused, with 503 Service Unavailable and a
	// JSON-RPC error as the body. Zero means DefaultMaxSessions; negative
	// means no limit.
	MaxSessions int

	// SessionIdleTimeout closes an HTTP session that has had no request
	// for this long, freeing what it holds; a session that has had no
	// request since its initialization closes after
	// DefaultFreshSessionTimeout (a minute) when that is shorter. A
	// session with a request being served, a run in flight or a running
	// cell does not expire; an open event stream (GET) does not keep it,
	// as the SDK's own timeout counts only POSTs. Zero means
	// DefaultSessionIdleTimeout; negative means sessions never expire.
	SessionIdleTimeout time.Duration

	// Runs keeps the runs that wait for the user's approval (see
	// Runtime.Policy): their states, and the records that let each ticket
	// the server hands out be used once (a retried or replayed one is
	// refused). A session's runs are deleted when it ends. Nil means a
	// store in this process's memory.
	Runs store.Runs

	// Cells lets a run outlive its execute call: execute takes a yieldMs
	// argument (or the program's "// @exec: yield=..." pragma), and a run
	// still going after that long answers with a cell id and the logs so
	// far; a second tool, wait, collects more output and the Result. Off
	// by default: the second tool costs every model its description, and
	// most runs end within one call (RATIONALE.md, "Why is wait a tool of
	// its own, and off by default?").
	Cells bool

	// Executor, when not nil, runs the programs of execute calls in place
	// of the server's own Runtime — a cluster of workers
	// (cluster.Node), say. The server's Runtime still describes the tools
	// (execute's description, search, the catalog) and is handed to
	// Execute, whose tool tree the executor's must match; the session is
	// in ctx (codemode.SessionFrom). Calls the executor's policy asks
	// about are put to the client's user by elicitation while the
	// request waits. With Cells, the Executor must be a CellExecutor:
	// its cells run where its runs do.
	Executor Executor

	// ConnectingWait bounds how long a run whose program names a
	// namespace that is still connecting (an [Unavailable] with
	// Connecting, given to SetTools) waits for it before it starts; a
	// call to it after that fails, naming the server and its state. Zero
	// means DefaultConnectingWait or Runtime.Timeout, whichever is
	// shorter (a run does not wait longer than it may run); negative
	// means runs do not wait.
	ConnectingWait time.Duration

	// REPL makes each session's execute calls the cells of one REPL
	// session (codemode.Runtime.ExecuteREPL): a cell's top-level
	// declarations stay defined for the session's later calls, and a
	// cell's value is its last expression's. The session's heap is kept
	// in this process's memory between calls, at most
	// Runtime.MaxStateBytes, and dropped when the session ends; a
	// session's cells run one at a time. The execute description says
	// so (Runtime.REPLInstructions). Not with Executor or Cells. A call
	// the policy asks about is put to the user by elicitation while the
	// request waits.
	REPL bool

	// CellOptions bound the cells when Cells is set: per session, how many
	// may wait to be collected, how long one nobody waits for lives, and
	// how much it prints before wait answers. Zero values are codemode's
	// defaults.
	CellOptions codemode.CellOptions
}

// Defaults for zero ServerOptions fields. Every open session costs memory
// and a slot whether or not its client is still there, and clients open a
// new session when theirs has expired, so the cap is sized for a handful
// of clients and the timeout lets abandoned sessions go quickly.
const (
	DefaultMaxSessions        = 64
	DefaultSessionIdleTimeout = 10 * time.Minute
	DefaultConnectingWait     = 30 * time.Second
)

// EventStoreBytes bounds the events [Server.HTTPHandler] keeps, over all
// its sessions, for clients that resume a stream with Last-Event-ID; past
// it the oldest go first. A client resumes within seconds of a drop, so
// this holds the results in flight with room to spare (a run's output is
// 20,000 bytes under codemode mcp's limits, its content at most 1 MiB).
const EventStoreBytes = 16 << 20

// Server serves the execute tool over MCP. Its tools can be replaced while
// it serves: runs in flight keep the tools they started with.
type Server struct {
	opts ServerOptions
	log  *slog.Logger
	mcp  *mcpsdk.Server

	setMu sync.Mutex // serializes SetTools, so descriptions apply in order

	mu      sync.Mutex
	rt      *codemode.Runtime
	desc    string
	unavail []Unavailable // as SetTools last got them
	set     chan struct{} // closed by the next SetTools
	closed  bool
	retired sync.WaitGroup // old runtimes draining their runs
	// draining are the old runtimes still draining, for Close to stop.
	draining map[*codemode.Runtime]bool

	// runs are the cancel functions of the runs in flight, by HTTP session,
	// so that a client ending its session stops its runs.
	runsMu sync.Mutex
	runs   map[string]map[*context.CancelFunc]struct{}
	cells  map[string]map[string]bool // cell ids by session name
	parked map[string]map[string]bool // ids of runs waiting for approval, by session name

	// steps fences the steps of runs waiting for approval (ServerOptions.Runs).
	steps store.Runs
	// cellTab keeps the cells of every runtime the server has had, so
	// that a cell outlives a tool-tree change (nil without Cells).
	cellTab cellKeeper
	// held are the lines of running cells a wait's maxTokens held back.
	held heldLines
	// watched are the sessions whose end is awaited, to free what they
	// hold (watch).
	watched sync.Map

	// keys for approvals: stateKey signs suspended runs, ticketKey the
	// tickets clients carry between round trips (approval.go)
	stateKey, ticketKey [32]byte
	bindings            sync.Map // weak *mcpsdk.ServerSession → its binding

	// live are the runs waiting for their client to answer a question
	// (live.go), by id.
	liveMu sync.Mutex
	live   map[string]*liveRun

	// repl are the REPL sessions' states, by session name (REPL).
	replMu sync.Mutex
	repl   map[string]*replSession

	// slots shares the run slots among sessions when MaxRuns caps them;
	// nil means no cap.
	slots *runSlots
	// freshTimeout replaces DefaultFreshSessionTimeout when not zero (tests).
	freshTimeout time.Duration
	// refusedRuns rate-limits the log lines of refused execute calls.
	refusedRuns refusalLog
}

// ErrServerClosed is returned by SetTools after Close.
var ErrServerClosed = errors.New("mcp: server closed")

// NewServer makes a server exposing `execute` over a runtime built from
// opts.Runtime. Serve it with MCP().Run on [StdioTransport] (stdio) or
// with HTTPHandler.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.Name == "" {
		opts.Name = "codemode"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var remoteCells CellExecutor
	if opts.Executor != nil && opts.Cells {
		ce, ok := opts.Executor.(CellExecutor)
		if !ok {
			return nil, errors.New("mcp: Cells with an Executor need one that runs cells (a CellExecutor, such as cluster.Node)")
		}
		remoteCells = ce
	}
	if opts.MaxRuns < 0 {
		return nil, fmt.Errorf("mcp: MaxRuns %d is negative", opts.MaxRuns)
	}
	if opts.REPL && (opts.Executor != nil || opts.Cells) {
		return nil, errors.New("mcp: REPL sessions keep their heap in this process: they work neither with an Executor nor with Cells")
	}
	s := &Server{opts: opts, log: logger, steps: opts.Runs}
	if s.steps == nil {
		s.steps = &store.MemoryRuns{}
	}
	_, _ = rand.Read(s.stateKey[:])
	_, _ = rand.Read(s.ticketKey[:])
	if opts.MaxRuns > 0 {
		queue := opts.MaxQueuedRuns
		if queue == 0 {
			queue = DefaultMaxQueuedRuns
		}
		wait := opts.RunWait
		if wait == 0 {
			wait = DefaultRunWait
			if t := opts.Runtime.Timeout; t > 0 && t < wait {
				wait = t
			}
		}
		s.slots = newRunSlots(opts.MaxRuns, max(queue, 0), max(wait, 0))
	}
	s.mcp = mcpsdk.NewServer(&mcpsdk.Implementation{Name: opts.Name, Version: opts.Version}, &mcpsdk.ServerOptions{
		Instructions: "Call the `execute` tool with a JavaScript or TypeScript program; the tool's description explains the program's environment and lists the tools it can call.",
		Logger:       logger,
		// Tools only: the server sends no log messages, prompts or
		// resources, so it does not advertise them.
		Capabilities: &mcpsdk.ServerCapabilities{Tools: &mcpsdk.ToolCapabilities{ListChanged: true}},
	})
	switch {
	case remoteCells != nil:
		s.cellTab = executorCells{remoteCells, s.elicitApproval}
	case opts.Cells:
		cells, err := codemode.NewCells(opts.CellOptions)
		if err != nil {
			return nil, err
		}
		s.cellTab = localCells{cells}
	}
	if opts.Cells {
		s.mcp.AddTool(waitToolDef(), s.wait)
	}
	if err := s.SetTools(opts.Runtime.Tools); err != nil {
		return nil, err
	}
	return s, nil
}

// MCP returns the underlying SDK server, to Run on a transport.
func (s *Server) MCP() *mcpsdk.Server { return s.mcp }

// Runtime returns the runtime the next run uses.
func (s *Server) Runtime() *codemode.Runtime {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rt
}

// HTTPHandler serves the server over streamable HTTP, with sessions (so
// progress and list_changed notifications reach the client) and the SDK's
// DNS-rebinding protection (a request reaching a loopback address must
// name a loopback host). At most ServerOptions.MaxSessions sessions are
// open at once, a new one taking the place of an idle one, and a session
// idle for SessionIdleTimeout is closed; its client gets 404 on its next
// request and, as the protocol prescribes, starts a new session.
//
// A client that ends its session (DELETE) stops its runs in flight; one
// that cancels a call stops that run; one whose connection just drops
// leaves its runs to end at their deadline. There is no authentication:
// bind it to loopback or put it behind one. Its event streams can be
// resumed (Last-Event-ID) from events kept in memory, at most
// EventStoreBytes over all sessions, and input the SDK cannot take gets a
// JSON-RPC error (see rpcErrors). Each call makes a handler with its own
// sessions: call it once.
func (s *Server) HTTPHandler() http.Handler {
	return sessionsHandler(s.mcp, s.log, s.opts.MaxSessions, s.opts.SessionIdleTimeout, s.freshTimeout, s.cancelSession, s.sessionBusy)
}

// session returns the open session with the given id, or nil.
func (s *Server) session(id string) *mcpsdk.ServerSession { return sessionByID(s.mcp, id) }

// sessionByID returns the open session of srv with the given id, or nil.
func sessionByID(srv *mcpsdk.Server, id string) *mcpsdk.ServerSession {
	if id == "" {
		return nil
	}
	for ss := range srv.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	return nil
}

// sessionBusy reports whether an HTTP session has a run in flight (one
// waiting for a slot, too) or a running cell: such a session is neither
// evicted nor expired.
func (s *Server) sessionBusy(id string) bool {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	return len(s.runs[id]) > 0 || len(s.cells[id]) > 0
}

// track registers a run's cancel function under its session.
func (s *Server) track(session string, cancel *context.CancelFunc) (untrack func()) {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	putNested(&s.runs, session, cancel, struct{}{})
	return func() {
		s.runsMu.Lock()
		defer s.runsMu.Unlock()
		deleteNested(s.runs, session, cancel)
	}
}

// cancelSession stops what a session holds: its runs in flight, its
// cells, the records of its runs waiting for approval and the values it
// stored. It is called when the session ends, and early, for a DELETE,
// since the SDK waits for a deleted session's handlers to return before
// ending it.
func (s *Server) cancelSession(session string) {
	s.runsMu.Lock()
	for cancel := range s.runs[session] {
		(*cancel)()
	}
	cells, parked := s.cells[session], s.parked[session]
	delete(s.cells, session)
	delete(s.parked, session)
	s.runsMu.Unlock()
	// The session's cells go with it: nobody can wait for them any more.
	ctx := codemode.WithSession(context.Background(), session)
	for id := range cells {
		_ = s.cellTab.cancel(ctx, id)
	}
	s.held.dropSession(session)
	// Its approvals can no longer be answered: the request states are
	// bound to it.
	for id := range parked {
		if _, rev, err := s.steps.Get(ctx, id); err == nil {
			_ = s.steps.Delete(ctx, id, rev)
		}
	}
	s.replMu.Lock()
	delete(s.repl, session)
	s.replMu.Unlock()
	if s.slots != nil {
		s.slots.forget(session)
	}
	if v := s.opts.Runtime.Values; v != nil {
		if err := v.Drop(ctx, session); err != nil {
			s.log.Warn("the session's stored values could not be dropped", "error", err)
		}
	}
}

// sessionName names a client session to the runtime (codemode.WithSession,
// which scopes cells and stored values): its id over HTTP, else a name
// of its own.
func (s *Server) sessionName(ss *mcpsdk.ServerSession) string {
	if id := ss.ID(); id != "" {
		return id
	}
	return s.binding(ss)
}

// sessionOf is the session name of a request's context, "" for none.
func (s *Server) sessionOf(ctx context.Context) string {
	if ss, _ := ctx.Value(sessionCtxKey{}).(*mcpsdk.ServerSession); ss != nil {
		return s.sessionName(ss)
	}
	return ""
}

// watch frees what a session holds once it ends, however it ends (a
// DELETE, an idle timeout, a closed stdio stream).
func (s *Server) watch(ss *mcpsdk.ServerSession) {
	if _, loaded := s.watched.LoadOrStore(ss, true); loaded {
		return
	}
	name := s.sessionName(ss)
	go func() {
		_ = ss.Wait()
		s.watched.Delete(ss)
		s.cancelSession(name)
	}()
}

// trackParked records a run waiting for approval under its session;
// untrackParked forgets it once it has ended.
func (s *Server) trackParked(session, runID string) {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	putNested(&s.parked, session, runID, true)
}

func (s *Server) untrackParked(session, runID string) {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	deleteNested(s.parked, session, runID)
}

// trackCell registers a cell under its session, so that the session
// ending stops it; untrackCell forgets it once its Result is collected.
func (s *Server) trackCell(session, id string) {
	if session == "" {
		return
	}
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	putNested(&s.cells, session, id, true)
}

func (s *Server) untrackCell(session, id string) {
	s.runsMu.Lock()
	defer s.runsMu.Unlock()
	deleteNested(s.cells, session, id)
}

// putNested sets m[a][b], making the maps it needs.
func putNested[A, B comparable, V any](m *map[A]map[B]V, a A, b B, v V) {
	if *m == nil {
		*m = map[A]map[B]V{}
	}
	if (*m)[a] == nil {
		(*m)[a] = map[B]V{}
	}
	(*m)[a][b] = v
}

// deleteNested deletes m[a][b], and m[a] when it is left empty.
func deleteNested[A, B comparable, V any](m map[A]map[B]V, a A, b B) {
	delete(m[a], b)
	if len(m[a]) == 0 {
		delete(m, a)
	}
}

// SetTools replaces the tool tree: the next run uses it, runs in flight
// finish with the old one, and the execute tool's description (its
// catalog) is updated, which notifies connected clients with
// tools/list_changed. unavailable lists namespaces that are configured but
// cannot be offered yet ([Upstreams.Unavailable] gives them): the
// description names each with its reason, so the model does not call them
// blindly. On error (an invalid tree) the old tools stay.
func (s *Server) SetTools(tools codemode.Tools, unavailable ...Unavailable) error {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	opts := s.opts.Runtime
	opts.Tools = tools
	opts.OnToolCallEnd = s.onToolCallEnd(opts.OnToolCallEnd)
	if opts.Policy != nil && opts.Approve == nil {
		opts.Approve = s.elicitApproval
	}
	if (opts.Policy != nil || s.opts.REPL) && opts.StateKey == nil {
		opts.StateKey = s.stateKey[:]
	}
	rt, err := codemode.New(opts)
	if err != nil {
		return err
	}
	desc := ExecuteDescription(rt, unavailable...)
	if s.opts.REPL {
		desc = rt.REPLInstructions() + unavailableText(unavailable)
	}
	if s.opts.Cells {
		desc += cellsDescription
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = rt.Close()
		return ErrServerClosed
	}
	old := s.rt
	s.rt = rt
	changed := desc != s.desc
	s.desc = desc
	s.unavail = append([]Unavailable(nil), unavailable...)
	if s.set != nil {
		close(s.set)
	}
	s.set = make(chan struct{})
	if old != nil {
		s.retired.Add(1)
		if s.draining == nil {
			s.draining = map[*codemode.Runtime]bool{}
		}
		s.draining[old] = true
	}
	s.mu.Unlock()
	if old != nil {
		go func() {
			defer s.retired.Done()
			// Runs in flight finish with the tools they started with.
			_ = old.Shutdown(context.Background())
			s.mu.Lock()
			delete(s.draining, old)
			s.mu.Unlock()
		}()
	}
	if changed {
		// Replacing the tool notifies sessions with tools/list_changed.
		def := executeToolDef(desc)
		if s.opts.Cells {
			def.InputSchema = executeCellInputSchema
		}
		if s.opts.REPL {
			def.InputSchema = executeREPLInputSchema
		}
		s.mcp.AddTool(def, s.execute)
	}
	return nil
}

// ExecuteDescription is the execute tool's description for rt's tools:
// the runtime's instructions, followed, when some namespaces are
// unavailable, by a section naming each with its reason. Server.SetTools
// describes the tool with it; a host can use it to show what a model
// reads.
func ExecuteDescription(rt *codemode.Runtime, unavailable ...Unavailable) string {
	return rt.Instructions() + unavailableText(unavailable)
}

// unavailableText is the section of the execute description that names
// the unavailable namespaces, or "" when there are none.
func unavailableText(list []Unavailable) string {
	var connecting, failed []Unavailable
	for _, u := range list {
		if u.Connecting {
			connecting = append(connecting, u)
		} else {
			failed = append(failed, u)
		}
	}
	var b strings.Builder
	if len(connecting) > 0 {
		b.WriteString("\n## Tools still connecting\n\n")
		b.WriteString("These namespaces' servers are still starting, so their tools are not listed yet. A program that calls one waits for it (a while) before it runs; this description changes when it arrives.\n\n")
		writeUnavailable(&b, connecting)
	}
	if len(failed) > 0 {
		b.WriteString("\n## Unavailable tools\n\n")
		b.WriteString("These namespaces are configured, but their servers could not be reached, so their tools are not listed and calls to them fail. Do not call them; if the task needs one, say that it is unavailable and why. The server keeps trying, and this description changes when one arrives.\n\n")
		writeUnavailable(&b, failed)
	}
	return b.String()
}

// writeUnavailable lists namespaces with their reasons.
func writeUnavailable(b *strings.Builder, list []Unavailable) {
	for _, u := range list {
		reason := strings.Join(strings.Fields(u.Reason), " ")
		if reason == "" {
			reason = "unknown"
		}
		fmt.Fprintf(b, "- `tools.%s`: %s\n", u.Namespace, reason)
	}
}

// Close stops the runs in flight (as codemode's Runtime.Close does),
// waits for them to return and refuses new ones. It does not close client
// sessions: the transport's owner does.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	rt := s.rt
	var old []*codemode.Runtime
	for r := range s.draining {
		old = append(old, r)
	}
	s.mu.Unlock()
	if s.cellTab != nil {
		s.cellTab.close()
	}
	err := rt.Close()
	for _, r := range old {
		_ = r.Close()
	}
	s.retired.Wait()
	return err
}

var executeInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "code": {
      "type": "string",
      "description": "The program: the body of an async function in JavaScript or TypeScript. Use await at the top level and return the value you need."
    }
  },
  "required": ["code"],
  "additionalProperties": false
}`)

// executeOutputSchema describes codemode.Result, so clients can rely on
// structuredContent.
var executeOutputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "ok": {"type": "boolean", "description": "Whether the program succeeded."},
    "value": {"description": "The program's return value, when ok."},
    "error": {
      "type": "object",
      "description": "Why the run failed, when not ok.",
      "properties": {
        "kind": {"type": "string", "enum": ["ParseError", "UnsupportedSyntax", "UnknownTool", "InvalidToolInput", "InvalidToolOutput", "InvalidDataValue", "ToolCallLimitExceeded", "TimeoutExceeded", "MemoryLimitExceeded", "ToolFailure", "ExecutionFailure"]},
        "message": {"type": "string"},
        "location": {"type": "object", "properties": {"line": {"type": "integer"}, "column": {"type": "integer"}}},
        "suggestions": {"type": "array", "items": {"type": "string"}},
        "cause": {"type": "string", "enum": ["program", "engine", "host"], "description": "For an ExecutionFailure: the program threw (running it again fails again), the engine died (it may succeed), or the host stopped the run."}
      },
      "required": ["kind", "message"]
    },
    "suspended": {
      "type": "object",
      "description": "Set, instead of error, when the run has not ended: it waits for the calls listed.",
      "properties": {
        "reason": {"type": "string"},
        "pending": {"type": "array", "items": {"type": "integer"}}
      },
      "required": ["reason", "pending"]
    },
    "logs": {"type": "array", "items": {"type": "string"}, "description": "The console lines."},
    "truncated": {"type": "boolean", "description": "The output limit cut the value or the logs."},
    "toolCalls": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "outcome": {"type": "string", "enum": ["ok", "error", "invalid-output", "cancelled", "denied", "pending"]}, "startMs": {"type": "integer"}, "durationMs": {"type": "integer"}}, "required": ["name"]}, "description": "The tool calls made, in order, with how each ended and how long it took."}
  },
  "required": ["ok", "toolCalls"]
}`)

// ExecuteInputSchema is the JSON Schema of the execute tool's input — the
// program, and with cells (ServerOptions.Cells) yieldMs — for a host that
// builds its own framework's tool around a Runtime and wants the shape
// models already know. Each call returns a copy of its own.
func ExecuteInputSchema(cells bool) json.RawMessage {
	if cells {
		return slices.Clone(executeCellInputSchema)
	}
	return slices.Clone(executeInputSchema)
}

// ResultSchema is the JSON Schema of a codemode.Result as JSON, the
// execute tool's structured output. Each call returns a copy of its own.
func ResultSchema() json.RawMessage { return slices.Clone(executeOutputSchema) }

func executeToolDef(description string) *mcpsdk.Tool {
	return &mcpsdk.Tool{
		Name:         ExecuteTool,
		Title:        "Run a program against the tools",
		Description:  description,
		InputSchema:  executeInputSchema,
		OutputSchema: executeOutputSchema,
	}
}

// execute serves one call of the execute tool.
func (s *Server) execute(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
	code, problem := executeInput(req.Params.Arguments)
	if problem != "" {
		return toolResult(codemode.Result{
			Error:     &codemode.Diagnostic{Kind: codemode.ParseError, Message: problem},
			ToolCalls: []codemode.ToolCall{},
		}), nil
	}
	if s.opts.Cells {
		if _, problem := maxTokensArg(req.Params.Arguments); problem != "" {
			return toolResult(codemode.Result{Error: &codemode.Diagnostic{Kind: codemode.ParseError, Message: problem},
				ToolCalls: []codemode.ToolCall{}}), nil
		}
	}
	if req.Session != nil {
		ctx = context.WithValue(ctx, sessionCtxKey{}, req.Session)
		ctx = codemode.WithSession(ctx, s.sessionName(req.Session))
		s.watch(req.Session)
		if id := req.Session.ID(); id != "" {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			defer s.track(id, &cancel)()
		}
	}
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		ctx = context.WithValue(ctx, progressKey{}, &progress{session: req.Session, token: tok})
	}
	var release func()
	if s.slots != nil {
		// After track, so that ending the session also ends the wait.
		session := ""
		if req.Session != nil {
			session = s.sessionName(req.Session)
		}
		var waited time.Duration
		var refused *slotRefusal
		release, waited, refused = s.slots.acquire(ctx, session)
		if refused != nil {
			msg := s.slotRefusalMessage(refused)
			s.refusedRuns.warn(s.log, "execute refused: no run slot", "why", refusalWhy(refused.reason),
				"maxRuns", s.slots.max, "waited", refused.waited.Round(time.Millisecond), "sessionRuns", refused.held,
				"sessionWaiting", refused.waiting, "codeBytes", len(code))
			return toolResult(codemode.Result{
				Error:     &codemode.Diagnostic{Kind: codemode.ExecutionFailure, Message: msg, Cause: codemode.CauseHost},
				ToolCalls: []codemode.ToolCall{},
			}), nil
		}
		defer func() {
			if release != nil {
				release()
			}
		}()
		if waited > 0 {
			s.log.Debug("execute waited for a run slot", "waited", waited.Round(time.Millisecond))
		}
	}
	start := time.Now()
	s.awaitConnecting(ctx, code)
	var res codemode.Result
	var err error
	// A run can race SetTools retiring the runtime it picked; the retired
	// one refuses new runs, so pick again.
	if t, ok := s.liveTicket(req); ok {
		// The answer to a question a run in flight asked.
		res, input, err := s.continueLive(ctx, req, t)
		switch {
		case errors.Is(err, errApprovalUsed):
			return toolResult(codemode.Result{Error: &codemode.Diagnostic{Kind: codemode.ExecutionFailure,
				Message: "this answer is for a question that was answered already, or whose run has ended"}, ToolCalls: []codemode.ToolCall{}}), nil
		case input != nil:
			return input, nil
		}
		s.explainUnknown(&res)
		return toolResult(res), nil
	}
	for range 3 {
		rt := s.Runtime()
		if pe, ok := s.opts.Executor.(ParkingExecutor); ok && !s.opts.Cells && req.Session != nil && supportsRoundTrips(req.Session) {
			var input *mcpsdk.CallToolResult
			res, input, err = s.parkingRoundTrip(ctx, pe, rt, req, code)
			if errors.Is(err, errApprovalState) || errors.Is(err, errApprovalUsed) {
				return toolResult(codemode.Result{Error: &codemode.Diagnostic{Kind: codemode.ExecutionFailure, Message: err.Error()},
					ToolCalls: []codemode.ToolCall{}}), nil
			}
			if input != nil {
				s.log.Info("execute waits for the user's approval", "calls", len(input.InputRequests), "codeBytes", len(code))
				return input, nil
			}
		} else if s.opts.Executor != nil && !s.opts.Cells {
			res, err = s.opts.Executor.Execute(ctx, rt, code, s.elicitApproval)
			if err != nil && res.Error == nil {
				res = codemode.Result{Error: &codemode.Diagnostic{Kind: codemode.ExecutionFailure, Message: "the program's result is not known: " + err.Error(),
					Cause: codemode.CauseOf(err)}, ToolCalls: []codemode.ToolCall{}}
			}
		} else if s.opts.Executor == nil && !s.opts.REPL && s.opts.Runtime.Policy != nil && req.Session != nil && supportsRoundTrips(req.Session) && supportsElicitation(req.Session) {
			var input *mcpsdk.CallToolResult
			res, input, err = s.roundTrip(ctx, rt, req, code)
			if errors.Is(err, errApprovalState) || errors.Is(err, errApprovalUsed) {
				return toolResult(codemode.Result{Error: &codemode.Diagnostic{Kind: codemode.ExecutionFailure, Message: err.Error()},
					ToolCalls: []codemode.ToolCall{}}), nil
			}
			if input != nil {
				s.log.Info("execute waits for the user's approval", "calls", len(input.InputRequests), "codeBytes", len(code))
				return input, nil
			}
		} else if s.opts.Executor == nil && !s.opts.Cells && req.Session != nil && supportsRoundTrips(req.Session) {
			// Questions an upstream server asks during the run reach the
			// client as input requests (live.go).
			var input *mcpsdk.CallToolResult
			res, input, err = s.liveRoundTrip(ctx, req, &release, func(ctx context.Context) (codemode.Result, error) {
				if s.opts.REPL {
					return s.replCell(ctx, rt, code)
				}
				return rt.Execute(ctx, code)
			})
			if input != nil {
				s.log.Info("execute waits for the user's answer to an upstream server's question", "codeBytes", len(code))
				return input, nil
			}
		} else if s.opts.REPL {
			res, err = s.replCell(ctx, rt, code)
		} else if s.opts.Cells {
			var running *mcpsdk.CallToolResult
			res, running, err = s.startCell(ctx, rt, req.Params.Arguments, code, &release)
			if running != nil {
				return running, nil
			}
		} else {
			res, err = rt.Execute(ctx, code)
		}
		if !errors.Is(err, codemode.ErrClosed) {
			break
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return nil, ErrServerClosed
		}
	}
	attrs := []any{"ok", res.OK, "took", time.Since(start).Round(time.Millisecond), "toolCalls", len(res.ToolCalls), "codeBytes", len(code)}
	if res.Error != nil {
		attrs = append(attrs, "kind", res.Error.Kind)
	}
	if err != nil {
		// The client cancelled or went away: the answer will not be read,
		// but the SDK still wants one.
		attrs = append(attrs, "error", err)
	}
	s.log.Info("execute", attrs...)
	s.explainUnknown(&res)
	return toolResult(res), nil
}

// Executor runs programs for a Server somewhere else (see
// ServerOptions.Executor). Execute returns the run's Result, or an error
// when it could not learn it (ctx ended, the executor is gone); the
// client is then told the run failed. approve asks the client's user
// about a call the executor's policy asked about (by elicitation, within
// the request; it denies when the client cannot ask).
type Executor interface {
	Execute(ctx context.Context, rt *codemode.Runtime, code string,
		approve func(ctx context.Context, c codemode.Call, question string) codemode.Decision) (codemode.Result, error)
}

// CellExecutor is an Executor whose runs can be cells (ServerOptions.Cells):
// StartCell, WaitCell and CancelCell work as codemode.Cells' Start, Wait
// and Cancel, on runs the executor runs. WaitCell decides the questions
// of a run parked for approval with approve, as Execute does.
type CellExecutor interface {
	Executor
	StartCell(ctx context.Context, rt *codemode.Runtime, code string) (string, error)
	WaitCell(ctx context.Context, id string, timeout time.Duration,
		approve func(ctx context.Context, c codemode.Call, question string) codemode.Decision) (codemode.CellUpdate, error)
	CancelCell(ctx context.Context, id string) error
}

// cellKeeper is where a server's cells run: in its process
// (codemode.Cells) or in its Executor's.
type cellKeeper interface {
	start(ctx context.Context, rt *codemode.Runtime, code string, onEnd func()) (string, error)
	wait(ctx context.Context, id string, timeout time.Duration) (codemode.CellUpdate, error)
	cancel(ctx context.Context, id string) error
	close()
}

type localCells struct{ c *codemode.Cells }

func (l localCells) start(ctx context.Context, rt *codemode.Runtime, code string, onEnd func()) (string, error) {
	var opts []codemode.CellOption
	if onEnd != nil {
		opts = append(opts, codemode.OnCellEnd(onEnd))
	}
	return l.c.Start(ctx, rt, code, opts...)
}
func (l localCells) wait(ctx context.Context, id string, timeout time.Duration) (codemode.CellUpdate, error) {
	return l.c.Wait(ctx, id, timeout)
}
func (l localCells) cancel(ctx context.Context, id string) error { return l.c.Cancel(ctx, id) }
func (l localCells) close()                                      { l.c.Close() }

// executorCells are an Executor's: the run slot is given back at once (the
// executor's workers bound its runs), and the questions of a parked cell
// are put to the user of the session that waits for it.
type executorCells struct {
	e       CellExecutor
	approve func(ctx context.Context, c codemode.Call, question string) codemode.Decision
}

func (x executorCells) start(ctx context.Context, rt *codemode.Runtime, code string, onEnd func()) (string, error) {
	if onEnd != nil {
		defer onEnd()
	}
	return x.e.StartCell(ctx, rt, code)
}
func (x executorCells) wait(ctx context.Context, id string, timeout time.Duration) (codemode.CellUpdate, error) {
	return x.e.WaitCell(ctx, id, timeout, x.approve)
}
func (x executorCells) cancel(ctx context.Context, id string) error { return x.e.CancelCell(ctx, id) }
func (x executorCells) close()                                      {}

// ParkingExecutor is an Executor whose runs can wait for answers between
// requests, holding nothing: for a client with multi round-trip requests,
// the server returns the questions as input requests and continues the
// run when the client retries with the answers (Execute's approve is for
// older clients, asked while the request waits).
type ParkingExecutor interface {
	Executor
	// Start runs code until it ends, or parks with questions.
	Start(ctx context.Context, rt *codemode.Runtime, code string) (codemode.Result, *Parked, error)
	// Continue answers a parked run's questions (by call index) and runs
	// it until it ends or parks again. Answers to a step that is not
	// parked any more (answered already, or ended) fail.
	Continue(ctx context.Context, run string, step int, answers map[int]codemode.Decision) (codemode.Result, *Parked, error)
}

// Parked is a run that waits for answers: the calls its policy asked
// about, each with its question (Reason).
type Parked struct {
	Run   string                 `json:"run"`
	Step  int                    `json:"step"`
	Calls []codemode.PendingCall `json:"calls"`
}

// slotRefusalMessage tells the model why its program did not run, with
// the numbers, and what to do.
func (s *Server) slotRefusalMessage(r *slotRefusal) string {
	limit := fmt.Sprintf("the server runs at most %s at once (%d more for sessions whose programs end within a second), at most %d for one session while others wait",
		plural(s.slots.max, "program"), s.slots.extra, s.slots.share)
	switch r.reason {
	case slotQueueFull:
		return fmt.Sprintf("the program did not run: this session already has %s waiting for a run slot, the most it may have (%s); "+
			"wait for those calls to answer before sending more", plural(r.waiting, "program"), limit)
	case slotWaitBound:
		return fmt.Sprintf("the program did not run: it waited %v for a run slot, the longest a program may wait, and none came free "+
			"(%s; this session was running %d and had %d waiting); the server is busy: retry later, and end programs that loop",
			s.slots.wait.Round(time.Millisecond), limit, r.held, r.waiting)
	}
	return fmt.Sprintf("the program did not run: the server was already running its limit of %s at once, "+
		"and the request ended after waiting %v for one to finish", plural(s.slots.max, "program"), r.waited.Round(time.Millisecond))
}

// refusalWhy names a slot refusal's reason for the log.
func refusalWhy(r slotReason) string {
	switch r {
	case slotQueueFull:
		return "session queue full"
	case slotWaitBound:
		return "waited too long"
	}
	return "request ended"
}

// onToolCallEnd reports a finished call: to the run's progress reporter,
// when the client asked for progress, and to the log (the tool's own
// error reaches only this hook, the program sees "Tool execution failed",
// so the log is where an operator finds it).
func (s *Server) onToolCallEnd(next func(context.Context, codemode.CallEnd)) func(context.Context, codemode.CallEnd) {
	return func(ctx context.Context, e codemode.CallEnd) {
		if next != nil {
			next(ctx, e)
		}
		if p, ok := ctx.Value(progressKey{}).(*progress); ok {
			p.done(ctx, e.Name, e.Outcome != codemode.OutcomeOK)
		}
		attrs := []any{"tool", e.Name, "outcome", e.Outcome, "took", e.Duration.Round(time.Millisecond)}
		switch e.Outcome {
		case codemode.OutcomeError, codemode.OutcomeInvalidOutput:
			if e.Err != nil {
				attrs = append(attrs, "error", e.Err)
				if cause := errors.Unwrap(e.Err); cause != nil {
					attrs = append(attrs, "cause", cause) // a ToolErrorCause's private part
				}
			} else {
				attrs = append(attrs, "message", e.Message)
			}
			s.log.Warn("tool call failed", attrs...)
		default:
			s.log.Debug("tool call", attrs...)
		}
	}
}

// executeInput extracts the program, or says what is wrong with the
// arguments in words the model can act on.
func executeInput(raw json.RawMessage) (string, string) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(raw, &in); err != nil || in == nil {
		return "", `the arguments must be an object: {"code": "<program>"}`
	}
	c, ok := in["code"]
	if !ok {
		return "", `the "code" argument is missing: pass {"code": "<program>"}`
	}
	var code string
	if err := json.Unmarshal(c, &code); err != nil {
		return "", `the "code" argument must be a string holding the program`
	}
	return code, ""
}

// toolResult is the MCP form of a Result: its JSON as text (with < and >
// left alone, as the model reads them) and as structuredContent, with
// isError set when the run failed. Hosts mark an isError result as a
// failure to the model, which prompts it to read the diagnostic and fix
// the program; the text is the same either way.
//
// The content a program returned (Result.Content, with
// Options.RichContent) follows the text as content blocks of their own,
// in order; the value's stand-ins name them by place, and neither the
// text nor structuredContent repeats their bytes.
func toolResult(res codemode.Result) *mcpsdk.CallToolResult {
	items := res.Content
	res.Content = nil
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		// A Result holds only JSON-safe values; this is unreachable, but a
		// panic must not escape into the SDK either way.
		buf.Reset()
		fmt.Fprintf(&buf, `{"ok":false,"error":{"kind":"ExecutionFailure","message":"the result could not be encoded"},"toolCalls":[]}`)
	}
	text := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	blocks := []mcpsdk.Content{&mcpsdk.TextContent{Text: string(text)}}
	for _, it := range items {
		blocks = append(blocks, contentBlock(it))
	}
	return &mcpsdk.CallToolResult{
		Content:           blocks,
		StructuredContent: json.RawMessage(text),
		IsError:           !res.OK,
	}
}

// contentBlock is the MCP form of a content item.
func contentBlock(it codemode.ContentItem) mcpsdk.Content {
	switch it.Type {
	case "image":
		return &mcpsdk.ImageContent{Data: it.Data, MIMEType: it.MIMEType}
	case "audio":
		return &mcpsdk.AudioContent{Data: it.Data, MIMEType: it.MIMEType}
	}
	rc := &mcpsdk.ResourceContents{URI: it.URI, MIMEType: it.MIMEType}
	if it.Data != nil {
		rc.Blob = it.Data
	} else {
		rc.Text = it.Text
	}
	return &mcpsdk.EmbeddedResource{Resource: rc}
}

// progressKey carries a run's progress reporter in the context given to
// Execute, which the OnToolCallEnd hook receives with each of the run's
// calls.
type progressKey struct{}

// progress sends notifications/progress for one run, one per finished
// tool call, when the client asked with a progress token.
type progress struct {
	session *mcpsdk.ServerSession
	token   any

	mu sync.Mutex // keeps the count and the notifications in order
	n  int
}

func (p *progress) done(ctx context.Context, name string, failed bool) {
	if ctx.Err() != nil {
		return // the call lost a race or the run ended: nothing to report
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	msg := fmt.Sprintf("%s finished; last: %s", plural(p.n, "tool call"), name)
	if failed {
		msg += " (failed)"
	}
	// A client that stops reading must not stall the tool's goroutine.
	nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = p.session.NotifyProgress(nctx, &mcpsdk.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(p.n), Message: msg})
}

// plural is "1 tool call", "2 tool calls": n and the noun, in the number
// it takes.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
