package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"weak"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/envelope"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Approvals over MCP.
//
// When the runtime has a Policy, calls it asks about go to the client's
// user. A client on a protocol version with multi round-trip requests
// (SEP-2322) gets the question as the execute call's input requests: the
// run is suspended meanwhile — no instance is held while the user thinks
// — its state waits in the server's run store, and the request state is a
// ticket naming the run's step, sealed and bound to the session (the
// state holds tool results the program has not chosen to return, so it
// never goes to the client). The client retries the call with the answers
// and the ticket, and the run goes on; a ticket continues its run once. An older client that supports elicitation is asked while the run
// waits (elicitApproval); a client that supports neither gets those calls
// denied, with a message saying why.

// mrtrVersion is the first protocol version with multi round-trip
// requests.
const mrtrVersion = "2026-07-28"

func supportsElicitation(ss *mcpsdk.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

func supportsRoundTrips(ss *mcpsdk.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.ProtocolVersion >= mrtrVersion
}

// errApprovalState: a retried call's request state is not one this server
// made for this session (it was changed, or the server restarted).
var errApprovalState = errors.New("the approval state is not valid here (changed, from another session, or the server restarted): run the program again")

// errApprovalUsed: a request state was used already. Each one continues
// its run once, so an approval retried or replayed never makes its calls
// again.
var errApprovalUsed = errors.New("this approval was answered already (a request state continues its run once): run the program again if it is still needed")

// roundTrip runs a program whose asked calls are answered through input
// requests: a retried call (with a request state) resumes the run with
// the answers, a new one starts it. It returns the Result when the run
// ended, or the input-required result when it waits for answers. Steps
// over the server's run store fence each request state to one use.
func (s *Server) roundTrip(ctx context.Context, rt *codemode.Runtime, req *mcpsdk.CallToolRequest, code string) (codemode.Result, *mcpsdk.CallToolResult, error) {
	ss := req.Session
	session := s.sessionName(ss)
	steps := codemode.Steps{Runtime: rt, Runs: s.steps, KeepStates: true, CompactStates: true}
	var res codemode.Result
	var susp *codemode.Suspended
	var err error
	if req.Params.RequestState == "" {
		res, susp, err = steps.Start(ctx, code)
	} else {
		t, oerr := s.openTicket(req.Params.RequestState, s.binding(ss))
		if oerr != nil {
			return codemode.Result{}, nil, oerr
		}
		state, step, serr := steps.State(ctx, t.Run)
		switch {
		case errors.Is(serr, codemode.ErrStepTaken) || serr == nil && step != t.Step:
			s.log.Warn("an approval was answered again; refused", "run", t.Run, "step", t.Step)
			return codemode.Result{}, nil, errApprovalUsed
		case serr != nil:
			return codemode.Result{}, nil, serr
		}
		res, susp, err = steps.Resume(ctx, state, func(ctx context.Context, pending *codemode.Suspended) ([]codemode.CallResult, error) {
			var results []codemode.CallResult
			for _, p := range pending.Pending {
				answer, ok := req.Params.InputResponses[strconv.Itoa(p.Index)].(*mcpsdk.ElicitResult)
				switch {
				case !ok:
					continue // unanswered: asked again
				case answer.Action == "accept" && answer.Content["approve"] == true:
					results = append(results, rt.RunPending(ctx, p))
				default:
					results = append(results, codemode.CallResult{Index: p.Index, Denied: deniedReason(answer.Action)})
				}
			}
			return results, nil
		})
		switch {
		case errors.Is(err, codemode.ErrStepTaken):
			s.log.Warn("a request state was used again; refused", "error", err)
			return codemode.Result{}, nil, errApprovalUsed
		case errors.Is(err, codemode.ErrStateInvalid), errors.Is(err, codemode.ErrStateTools), errors.Is(err, codemode.ErrStateEngine):
			return codemode.Result{}, nil, errApprovalState
		}
		if susp == nil {
			s.untrackParked(session, t.Run)
		}
	}
	if err != nil || susp == nil {
		return res, nil, err
	}
	s.trackParked(session, susp.RunID)
	sealed, err := s.sealTicket(ticket{Run: susp.RunID, Step: susp.Step, Session: s.binding(ss)})
	if err != nil {
		return codemode.Result{}, nil, err
	}
	requests := mcpsdk.InputRequestMap{}
	for _, p := range susp.Pending {
		requests[strconv.Itoa(p.Index)] = approvalRequest(p.Reason, p.Call)
	}
	return res, &mcpsdk.CallToolResult{InputRequests: requests, RequestState: sealed}, nil
}

// parkingRoundTrip is roundTrip for runs an executor parks: the ticket
// names the parked run's step, and the executor keeps the run.
func (s *Server) parkingRoundTrip(ctx context.Context, pe ParkingExecutor, rt *codemode.Runtime, req *mcpsdk.CallToolRequest, code string) (codemode.Result, *mcpsdk.CallToolResult, error) {
	ss := req.Session
	var res codemode.Result
	var parked *Parked
	var err error
	if req.Params.RequestState == "" {
		res, parked, err = pe.Start(ctx, rt, code)
	} else {
		t, oerr := s.openTicket(req.Params.RequestState, s.binding(ss))
		if oerr != nil {
			return codemode.Result{}, nil, oerr
		}
		answers := map[int]codemode.Decision{}
		for key, v := range req.Params.InputResponses {
			index, cerr := strconv.Atoi(key)
			answer, ok := v.(*mcpsdk.ElicitResult)
			if cerr != nil || !ok {
				continue
			}
			if answer.Action == "accept" && answer.Content["approve"] == true {
				answers[index] = codemode.Decision{Verdict: codemode.Allow, By: answeredBy(ss)}
			} else {
				answers[index] = codemode.Decision{Verdict: codemode.Deny, Reason: deniedReason(answer.Action), By: answeredBy(ss)}
			}
		}
		for _, index := range t.Calls {
			if _, ok := answers[index]; !ok {
				answers[index] = codemode.Decision{Verdict: codemode.Deny, Reason: "the user did not answer"}
			}
		}
		res, parked, err = pe.Continue(ctx, t.Run, t.Step, answers)
		if err != nil && res.Error == nil {
			s.log.Warn("continuing a parked run failed", "run", t.Run, "step", t.Step, "error", err)
			return codemode.Result{}, nil, errApprovalUsed
		}
	}
	if err != nil || parked == nil {
		return res, nil, err
	}
	tk := ticket{Run: parked.Run, Step: parked.Step, Session: s.binding(ss)}
	for _, c := range parked.Calls {
		tk.Calls = append(tk.Calls, c.Index)
	}
	sealed, err := s.sealTicket(tk)
	if err != nil {
		return codemode.Result{}, nil, err
	}
	requests := mcpsdk.InputRequestMap{}
	for _, p := range parked.Calls {
		requests[strconv.Itoa(p.Index)] = approvalRequest(p.Reason, p.Call)
	}
	return res, &mcpsdk.CallToolResult{InputRequests: requests, RequestState: sealed}, nil
}

// approvalRequest is the elicitation that asks the user about one call:
// the question, the tool with its annotations, and the whole input as
// canonical JSON (the policy denied calls whose input is too large to
// show whole).
func approvalRequest(question string, c codemode.Call) *mcpsdk.ElicitParams {
	if question == "" {
		question = "Allow " + c.Name + "?"
	}
	msg := fmt.Sprintf("%s\n\nThe program calls %s%s with this input (all of it):\n%s", question, c.Name, annotationText(c.Annotations), c.Shown())
	return &mcpsdk.ElicitParams{
		Message: msg,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "title": "Allow this call?"},
			},
			"required": []string{"approve"},
		},
	}
}

// annotationText describes what a tool's annotations claim it does.
func annotationText(a *codemode.Annotations) string {
	switch {
	case a == nil:
		return " (it declares no annotations: it may change anything)"
	case a.Destructive:
		return " (it may delete or overwrite)"
	case a.ReadOnly:
		return " (read-only)"
	}
	return ""
}

func deniedReason(action string) string {
	switch action {
	case "accept":
		return "the user did not approve it"
	case "decline":
		return "the user declined it"
	}
	return "the user dismissed the request"
}

// elicitApproval is Options.Approve for clients without multi round-trip
// requests: it asks the user while the run waits, or denies the call when
// the client cannot ask.
func (s *Server) elicitApproval(ctx context.Context, c codemode.Call, question string) codemode.Decision {
	ss, _ := ctx.Value(sessionCtxKey{}).(*mcpsdk.ServerSession)
	if ss == nil {
		return codemode.Decision{Verdict: codemode.Deny, Reason: "it needs a person's approval, and there is no client session to ask"}
	}
	if !supportsElicitation(ss) {
		return codemode.Decision{Verdict: codemode.Deny,
			Reason: "it needs the user's approval, and this MCP client cannot ask the user (it does not support elicitation)"}
	}
	var res *mcpsdk.ElicitResult
	var err error
	if lr, ok := ctx.Value(liveKey{}).(*liveRun); ok && supportsRoundTrips(ss) {
		// A live run (a REPL cell, say) asks through input requests.
		res = lr.ask(ctx, approvalRequest(question, c))
	} else {
		res, err = ss.Elicit(ctx, approvalRequest(question, c))
	}
	switch {
	case err != nil:
		s.log.Warn("asking the user to approve a call failed", "tool", c.Name, "error", err)
		return codemode.Decision{Verdict: codemode.Deny, Reason: "the request for the user's approval failed"}
	case res.Action == "accept" && res.Content["approve"] == true:
		return codemode.Decision{Verdict: codemode.Allow, By: answeredBy(ss)}
	}
	return codemode.Decision{Verdict: codemode.Deny, Reason: deniedReason(res.Action), By: answeredBy(ss)}
}

// answeredBy names the user of an MCP session, for the record of who
// answered: the client's name and the session.
func answeredBy(ss *mcpsdk.ServerSession) string {
	who := "an MCP client"
	if ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
			who = "MCP client " + strconv.Quote(p.ClientInfo.Name)
		}
		if id := ss.ID(); id != "" {
			who += " (session " + id + ")"
		}
	}
	return "the user of " + who
}

type sessionCtxKey struct{}

// binding names a session for the request states made in it: its id over
// HTTP, else (stdio, in-memory) a random name of its own, forgotten when
// the session is.
func (s *Server) binding(ss *mcpsdk.ServerSession) string {
	if id := ss.ID(); id != "" {
		return "id:" + id
	}
	key := weak.Make(ss)
	if v, ok := s.bindings.Load(key); ok {
		return v.(string)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	v, loaded := s.bindings.LoadOrStore(key, "conn:"+base64.RawURLEncoding.EncodeToString(b[:]))
	if !loaded {
		bindings := &s.bindings
		runtime.AddCleanup(ss, func(k weak.Pointer[mcpsdk.ServerSession]) { bindings.Delete(k) }, key)
	}
	return v.(string)
}

// ticket is what a client carries between the round trips of an
// approval: which step of which run it answers, in which session. The
// state itself stays in the server's run store (ServerOptions.Runs), so
// the client learns nothing of what the program read.
type ticket struct {
	Run     string `json:"run"`
	Step    int    `json:"step"`
	Session string `json:"session"`
	// Calls are the indices of the calls asked about, for a run an
	// executor parked: an answer the client leaves out is a no.
	Calls []int `json:"calls,omitempty"`
	// Live names a run going on in this process whose question the call
	// answers (live.go).
	Live string `json:"live,omitempty"`
}

const ticketMagic = "CMTICKT1"

// sealTicket seals a ticket in the envelope states use, under a key of
// the server's.
func (s *Server) sealTicket(t ticket) (string, error) {
	head, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(envelope.Seal(nil, ticketMagic, head, s.ticketKey[:])), nil
}

// openTicket opens a ticket sealed for this session.
func (s *Server) openTicket(sealed, session string) (ticket, error) {
	var t ticket
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil {
		return t, errApprovalState
	}
	if _, _, err := envelope.Open(b, ticketMagic, [][]byte{s.ticketKey[:]}, &t); err != nil || t.Session != session {
		return t, errApprovalState
	}
	return t, nil
}
