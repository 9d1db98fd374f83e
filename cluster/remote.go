package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/codemode-go/codemode"
	"github.com/nats-io/nats.go"
)

// Tools that live in the front.
//
// Some tools cannot run on a worker: a Go host's own functions, tools
// holding credentials that must stay in one process. The front serves
// them (ServeTools) and workers call them there (Remote): the worker's
// tree has the same tools — paths, schemas, annotations, so states and
// tool-tree sums match — whose Run asks a front that serves the tool, and
// fails closed when none does. A call is never made by anyone else.

// toolSubject is the subject a tool is served on: a digest of its path
// (paths may hold characters subjects cannot).
func toolSubject(path []string) string {
	sum := sha256.Sum256([]byte(strings.Join(path, "\x00")))
	return "cm.tool." + hex.EncodeToString(sum[:12])
}

type toolRequest struct {
	Input   json.RawMessage `json:"input"`
	Session string          `json:"session,omitempty"`
	Key     string          `json:"key,omitempty"` // the idempotency key
}

type toolReply struct {
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
	Safe   bool            `json:"safe,omitempty"`
}

// remoteKey carries an idempotency key to a tool a front runs for a
// worker.
type remoteKey struct{}

// ServeTools answers workers' calls of tools until ctx ends: each tool
// runs here, with a context holding the caller's session
// (codemode.SessionFrom) and idempotency key (IdempotencyKey). Several
// fronts may serve the same tools; each call goes to one of them.
func (n *Node) ServeTools(ctx context.Context, tools codemode.Tools) error {
	var subs []*nats.Subscription
	var err error
	walk(tools, nil, func(path []string, t codemode.Tool) {
		if err != nil {
			return
		}
		var sub *nats.Subscription
		sub, err = n.nc.QueueSubscribe(toolSubject(path), "tools", func(m *nats.Msg) {
			go n.serveCall(ctx, t, m)
		})
		subs = append(subs, sub)
	})
	if err == nil {
		err = n.nc.Flush()
	}
	stop := func() {
		for _, s := range subs {
			if s != nil {
				_ = s.Unsubscribe()
			}
		}
	}
	if err != nil {
		stop()
		return fmt.Errorf("cluster: serving tools: %w", err)
	}
	go func() { <-ctx.Done(); stop() }()
	return nil
}

func (n *Node) serveCall(ctx context.Context, t codemode.Tool, m *nats.Msg) {
	var req toolRequest
	var reply toolReply
	if err := json.Unmarshal(m.Data, &req); err != nil {
		reply.Error = "the call was malformed"
	} else {
		cctx := ctx
		if req.Session != "" {
			cctx = codemode.WithSession(cctx, req.Session)
		}
		if req.Key != "" {
			cctx = context.WithValue(cctx, remoteKey{}, req.Key)
		}
		out, err := runTool(cctx, t, req.Input)
		if err != nil {
			reply.Error, reply.Safe = codemode.ToolErrorMessage(err)
			if !reply.Safe {
				reply.Error = "the call failed"
			}
		} else if reply.Output, err = json.Marshal(out); err != nil {
			reply.Error = "the tool's output is not JSON"
		}
	}
	_ = m.Respond(mustJSON(reply))
}

// runTool runs a tool, turning a panic into an error as a run would.
func runTool(ctx context.Context, t codemode.Tool, in json.RawMessage) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errors.New("the tool panicked")
		}
	}()
	return t.Run(ctx, in)
}

// Remote returns tools for a worker's Runtime: the same tree, each tool
// run by a front that serves it (ServeTools). A call of a tool no front
// serves fails with a ToolError saying so; it is never run elsewhere.
func (n *Node) Remote(tools codemode.Tools) codemode.Tools {
	return remap(tools, nil, func(path []string, t codemode.Tool) codemode.Tool {
		subject, name := toolSubject(path), strings.Join(path, ".")
		t.Run = func(ctx context.Context, in json.RawMessage) (any, error) {
			session, _ := codemode.SessionFrom(ctx)
			key, _ := IdempotencyKey(ctx)
			m, err := n.nc.RequestWithContext(ctx, subject, mustJSON(toolRequest{Input: in, Session: session, Key: key}))
			switch {
			case errors.Is(err, nats.ErrNoResponders):
				return nil, codemode.ToolErrorf("%s runs only in a front of this cluster, and no front serving it is connected", name)
			case err != nil:
				return nil, codemode.ToolErrorCause(name+" runs in a front of this cluster, which did not answer", err)
			}
			var reply toolReply
			if err := json.Unmarshal(m.Data, &reply); err != nil {
				return nil, fmt.Errorf("cluster: the front's answer for %s: %w", name, err)
			}
			switch {
			case reply.Error != "" && reply.Safe:
				return nil, codemode.ToolError(reply.Error)
			case reply.Error != "":
				return nil, errors.New(reply.Error)
			}
			return reply.Output, nil
		}
		return t
	})
}

// walk calls f for each tool of a tree, with its path.
func walk(tools codemode.Tools, prefix []string, f func([]string, codemode.Tool)) {
	remap(tools, prefix, func(path []string, t codemode.Tool) codemode.Tool { f(path, t); return t })
}

// remap copies a tree, each tool replaced by f's.
func remap(tools codemode.Tools, prefix []string, f func([]string, codemode.Tool) codemode.Tool) codemode.Tools {
	out := make(codemode.Tools, len(tools))
	for name, v := range tools {
		path := append(append([]string(nil), prefix...), name)
		switch v := v.(type) {
		case codemode.Tool:
			out[name] = f(path, v)
		case codemode.Tools:
			out[name] = remap(v, path, f)
		default:
			out[name] = v
		}
	}
	return out
}
