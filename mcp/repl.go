package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/codemode-go/codemode"
)

// replSession is one client session's REPL state (ServerOptions.REPL).
type replSession struct {
	mu    sync.Mutex // one cell at a time: each starts from the last one's heap
	state []byte
}

var executeREPLInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "code": {
      "type": "string",
      "description": "The next cell of the session: a script in JavaScript or TypeScript. Top-level declarations stay defined for later cells; await works at the top level; the value of the last expression statement is the result (no return)."
    }
  },
  "required": ["code"],
  "additionalProperties": false
}`)

// replCell runs code as the next cell of the calling session.
func (s *Server) replCell(ctx context.Context, rt *codemode.Runtime, code string) (codemode.Result, error) {
	name := s.sessionOf(ctx)
	s.replMu.Lock()
	rs := s.repl[name]
	if rs == nil {
		rs = &replSession{}
		if s.repl == nil {
			s.repl = map[string]*replSession{}
		}
		s.repl[name] = rs
	}
	s.replMu.Unlock()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	res, next, err := rt.ExecuteREPL(ctx, rs.state, code)
	if errors.Is(err, codemode.ErrStateInvalid) || errors.Is(err, codemode.ErrStateEngine) {
		// The server made the state with its own key and engine, so this
		// is a state it cannot use any more (a new StateKey in the
		// options, say): start the session afresh, and say so.
		s.log.Warn("a REPL session's state could not be used; the session starts afresh", "error", err)
		res, next, err = rt.ExecuteREPL(ctx, nil, code)
		res.Logs = append([]string{"[the session's earlier variables were lost (its state could not be read again); this cell ran in a new session]"}, res.Logs...)
	}
	if len(next) > 0 {
		rs.state = next
	}
	return res, err
}
