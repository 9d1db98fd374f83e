package mcp

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/codemode-go/codemode"
)

// Namespaces that are still connecting.
//
// codemode mcp answers initialize before its upstream servers have
// started (ClientOptions.Background), so a model may call a namespace
// whose tools are not listed yet. A run whose program names one waits
// for it, within ServerOptions.ConnectingWait, before it picks its
// runtime: the program then sees the tools as if they had always been
// there. A run that still calls a namespace that is not there fails with
// UnknownTool, and the message says which server that is and what state
// it is in, rather than only that the name is not a tool.

// awaitConnecting waits, within the bound, until no namespace the program
// names is still connecting, or ctx ends.
func (s *Server) awaitConnecting(ctx context.Context, code string) {
	bound := s.opts.ConnectingWait
	if bound == 0 {
		bound = DefaultConnectingWait
	}
	if t := s.opts.Runtime.Timeout; t > 0 && t < bound {
		bound = t // a run does not wait longer than it may run
	}
	if bound < 0 {
		return
	}
	var timeout <-chan time.Time
	for {
		s.mu.Lock()
		var waiting []string
		for _, u := range s.unavail {
			if u.Connecting && names(code, u.Namespace) {
				waiting = append(waiting, u.Namespace)
			}
		}
		set := s.set
		s.mu.Unlock()
		if len(waiting) == 0 {
			return
		}
		if timeout == nil {
			s.log.Info("execute waits for servers still connecting", "servers", waiting, "atMost", bound)
			t := time.NewTimer(bound)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-set:
		case <-timeout:
			return
		case <-ctx.Done():
			return
		}
	}
}

// names reports whether code calls into namespace ns: tools.ns,
// tools?.ns or tools["ns"] (or with single quotes or backquotes). A name
// used another way (destructured, computed) is not seen, and its run does
// not wait.
func names(code, ns string) bool {
	q := regexp.QuoteMeta(ns)
	re := `\btools\s*(\?\.)?\[\s*["'` + "`" + `]` + q + `["'` + "`" + `]\s*\]`
	if identifier.MatchString(ns) {
		re += `|\btools\s*\??\.\s*` + q + `([^\w$]|$)`
	}
	return regexp.MustCompile(re).MatchString(code)
}

// identifier matches the names a program can write after a dot (ASCII
// ones: others are found in brackets only).
var identifier = regexp.MustCompile(`^[A-Za-z_$][\w$]*$`)

// explainUnknown adds to an UnknownTool failure in a namespace that is
// unavailable which server that is and why it has no tools.
func (s *Server) explainUnknown(res *codemode.Result) {
	if res.Error == nil || res.Error.Kind != codemode.UnknownTool {
		return
	}
	s.mu.Lock()
	list := s.unavail
	s.mu.Unlock()
	for _, u := range list {
		if !strings.Contains(res.Error.Message, calledIn(u.Namespace)) && !strings.Contains(res.Error.Message, fmt.Sprintf("tools[%q]", u.Namespace)) {
			continue
		}
		state := "is unavailable: " + u.Reason
		if u.Connecting {
			state = "is " + u.Reason
		}
		res.Error.Message += fmt.Sprintf(": the MCP server %q %s", u.Namespace, state)
		res.Error.Suggestions = []string{"Do not call tools." + u.Namespace + " until the execute description lists its tools; tell the user if the task needs it."}
		return
	}
}

// calledIn is how a failure message writes a call into namespace ns.
func calledIn(ns string) string { return "tools." + ns + "." }
