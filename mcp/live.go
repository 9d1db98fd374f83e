package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Live round trips.
//
// On MCP 2026-07-28 and later a server may not send elicitation/create
// while it serves a request: it answers with input requests, and the
// client calls again with the answers. A run waiting for a policy's
// answer is suspended between those calls (roundTrip), but a run whose
// upstream server asks its user something is in the middle of that
// server's tool call, which cannot be written down. So such a run goes on
// in this process: the execute call answers with the question, the run
// waits for the answer, and the client's next call delivers it and
// waits for what comes next — the Result or another question.

// liveAnswerWait bounds how long a live run waits for the client to come
// back with an answer; a question left unanswered is declined.
const liveAnswerWait = 10 * time.Minute

// liveRun is a run that may put questions to its client between calls.
type liveRun struct {
	id        string
	session   string // the binding of the session that started it
	questions chan *liveQuestion
	done      chan liveEnd // buffered: the run never waits for a reader

	mu      sync.Mutex
	pending *liveQuestion // the question the client was sent
}

type liveQuestion struct {
	params *mcpsdk.ElicitParams
	answer chan *mcpsdk.ElicitResult // buffered
}

type liveEnd struct {
	res codemode.Result
	err error
}

type liveKey struct{}

// ask puts a question to the live run's client through its next answer,
// and waits for the client to come back with the answer (declined when
// it does not, in time).
func (lr *liveRun) ask(ctx context.Context, p *mcpsdk.ElicitParams) *mcpsdk.ElicitResult {
	q := &liveQuestion{params: p, answer: make(chan *mcpsdk.ElicitResult, 1)}
	timer := time.NewTimer(liveAnswerWait)
	defer timer.Stop()
	select {
	case lr.questions <- q:
	case <-ctx.Done():
		return &mcpsdk.ElicitResult{Action: "cancel"}
	}
	select {
	case a := <-q.answer:
		return a
	case <-ctx.Done():
		return &mcpsdk.ElicitResult{Action: "cancel"}
	case <-timer.C:
		return &mcpsdk.ElicitResult{Action: "decline"}
	}
}

// liveRoundTrip runs a program for a client with multi round-trip
// requests so that an upstream server's questions reach it: run is
// started apart from the request, holding the run slot *release (taken
// over), and the call answers with the Result, or with the first
// question as an input request.
func (s *Server) liveRoundTrip(ctx context.Context, req *mcpsdk.CallToolRequest, release *func(),
	run func(ctx context.Context) (codemode.Result, error)) (codemode.Result, *mcpsdk.CallToolResult, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	lr := &liveRun{id: hex.EncodeToString(b[:]), session: s.binding(req.Session),
		questions: make(chan *liveQuestion), done: make(chan liveEnd, 1)}
	// The run outlives this call, but not its session.
	runCtx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), liveKey{}, lr))
	untrack := func() {}
	if id := req.Session.ID(); id != "" {
		untrack = s.track(id, &cancel)
	}
	slot := *release
	*release = nil
	go func() {
		defer cancel()
		defer untrack()
		if slot != nil {
			defer slot()
		}
		res, err := run(runCtx)
		lr.done <- liveEnd{res, err}
		s.liveMu.Lock()
		delete(s.live, lr.id)
		s.liveMu.Unlock()
	}()
	return s.awaitLive(ctx, lr, cancel)
}

// continueLive delivers a client's answer to its live run's question and
// waits for what the run does next. ok is false when the request state
// does not name a live run of this session.
func (s *Server) continueLive(ctx context.Context, req *mcpsdk.CallToolRequest, t ticket) (codemode.Result, *mcpsdk.CallToolResult, error) {
	s.liveMu.Lock()
	lr := s.live[t.Live]
	delete(s.live, t.Live) // an answer is delivered once
	s.liveMu.Unlock()
	if lr == nil || lr.session != t.Session {
		return codemode.Result{}, nil, errApprovalUsed
	}
	lr.mu.Lock()
	q := lr.pending
	lr.pending = nil
	lr.mu.Unlock()
	if q != nil {
		a, _ := req.Params.InputResponses["0"].(*mcpsdk.ElicitResult)
		if a == nil {
			a = &mcpsdk.ElicitResult{Action: "decline"}
		}
		q.answer <- a
	}
	return s.awaitLive(ctx, lr, nil)
}

// awaitLive waits for a live run's end or its next question. When the
// call's request ends first, the run is stopped with cancel (nil: it goes
// on, a question answered and the client gone again; its own deadline
// ends it).
func (s *Server) awaitLive(ctx context.Context, lr *liveRun, cancel context.CancelFunc) (codemode.Result, *mcpsdk.CallToolResult, error) {
	select {
	case e := <-lr.done:
		return e.res, nil, e.err
	case q := <-lr.questions:
		lr.mu.Lock()
		lr.pending = q
		lr.mu.Unlock()
		s.liveMu.Lock()
		if s.live == nil {
			s.live = map[string]*liveRun{}
		}
		s.live[lr.id] = lr
		s.liveMu.Unlock()
		sealed, err := s.sealTicket(ticket{Live: lr.id, Session: lr.session})
		if err != nil {
			return codemode.Result{}, nil, err
		}
		return codemode.Result{}, &mcpsdk.CallToolResult{InputRequests: mcpsdk.InputRequestMap{"0": q.params}, RequestState: sealed}, nil
	case <-ctx.Done():
		if cancel != nil {
			cancel()
		}
		e := <-lr.done
		return e.res, nil, ctx.Err()
	}
}

// liveTicket returns the ticket of a call that answers a live run's
// question, if it is one.
func (s *Server) liveTicket(req *mcpsdk.CallToolRequest) (ticket, bool) {
	if req.Session == nil || req.Params.RequestState == "" {
		return ticket{}, false
	}
	t, err := s.openTicket(req.Params.RequestState, s.binding(req.Session))
	if err != nil || t.Live == "" {
		return ticket{}, false
	}
	return t, true
}
