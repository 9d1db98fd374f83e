package mcp

import (
	"context"
	"strconv"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// AnswerElicitation puts an upstream server's question (its
// elicitation/create, made while a program's call of one of its tools
// was in flight) to the user of the MCP client whose program made the
// call, and returns the answer for the upstream. ctx is the call's,
// which carries the client's session; give this method as
// ClientOptions.Elicit. When the run has no client session, or the client
// cannot ask its user (no elicitation capability, or not the URL mode a
// URL elicitation needs), the question is declined and logged: it is
// never answered on the user's behalf.
func (s *Server) AnswerElicitation(ctx context.Context, server string, p *mcpsdk.ElicitParams) (*mcpsdk.ElicitResult, error) {
	ss, _ := ctx.Value(sessionCtxKey{}).(*mcpsdk.ServerSession)
	decline := func(why string) (*mcpsdk.ElicitResult, error) {
		s.log.Warn("an upstream server's question to the user was declined: "+why, "server", server, "message", p.Message)
		return &mcpsdk.ElicitResult{Action: "decline"}, nil
	}
	switch {
	case ss == nil:
		return decline("the run has no client session to ask")
	case !supportsElicitation(ss):
		return decline("the client cannot ask its user (it does not support elicitation)")
	case p.Mode == "url" && !supportsURLElicitation(ss):
		return decline("the client cannot send its user to a URL (no URL elicitation)")
	}
	q := *p
	q.Meta = nil
	// The user sees who asks: the upstream server, not this one.
	q.Message = "The MCP server " + strconv.Quote(server) + " asks (for a call a program made): " + p.Message
	if lr, ok := ctx.Value(liveKey{}).(*liveRun); ok && supportsRoundTrips(ss) {
		// The client takes questions as input requests: the run waits
		// for it to come back with the answer.
		res := lr.ask(ctx, &q)
		s.log.Info("an upstream server's question was answered", "server", server, "action", res.Action)
		return res, nil
	}
	res, err := ss.Elicit(ctx, &q)
	if err != nil {
		s.log.Warn("putting an upstream server's question to the user failed", "server", server, "error", err)
		return nil, err
	}
	s.log.Info("an upstream server's question was answered by the user", "server", server, "action", res.Action)
	return res, nil
}

func supportsURLElicitation(ss *mcpsdk.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil && p.Capabilities.Elicitation.URL != nil
}
