package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// SessionOptions configure [SessionTools]. The zero value is ready to use.
type SessionOptions struct {
	// Allow and Deny filter the session's tools by name, as
	// UpstreamConfig's do.
	Allow, Deny []string

	// CallTimeout bounds one tool call, as ClientOptions.CallTimeout does.
	// Zero means no bound other than the run's own deadline.
	CallTimeout time.Duration

	// MaxInlineBytes is as ClientOptions.MaxInlineBytes. Zero means
	// DefaultMaxInlineBytes; negative means never.
	MaxInlineBytes int

	// Logger receives dropped schemas and renamed or skipped tools. Nil
	// discards them.
	Logger *slog.Logger
}

// SessionTools lists the tools of an MCP session the caller already holds
// (a go-sdk ClientSession connected any way: an in-memory transport, an
// authorization flow of the host's own) and returns them as a namespace
// for a tool tree: codemode.Tools{"github": tools}. Calls go through cs,
// with the conversions Connect's tools use; the caller keeps cs and
// closes it when done, after which calls fail with a ToolFailure. Unlike
// Connect, nothing reconnects or follows tools/list_changed: call
// SessionTools again for a fresh listing.
func SessionTools(ctx context.Context, cs *mcpsdk.ClientSession, opts SessionOptions) (codemode.Tools, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.MaxInlineBytes == 0 {
		opts.MaxInlineBytes = DefaultMaxInlineBytes
	}
	conv := converter{maxInline: opts.MaxInlineBytes}
	list, err := listTools(ctx, cs, log)
	if err != nil {
		return nil, fmt.Errorf("mcp: listing tools: %w", err)
	}
	filter := UpstreamConfig{Allow: opts.Allow, Deny: opts.Deny}
	ts := toolset{log: log, allowed: filter.allowed, call: func(ctx context.Context, tool string, input json.RawMessage) (any, error) {
		if err := checkArguments(input); err != nil {
			return nil, err
		}
		callCtx, cancel := withCallTimeout(ctx, opts.CallTimeout)
		defer cancel()
		res, err := cs.CallTool(callCtx, &mcpsdk.CallToolParams{Name: tool, Arguments: input})
		if callCtx.Err() != nil && err != nil {
			return nil, timeoutOr(ctx, callCtx, err, "the MCP session", opts.CallTimeout)
		}
		if v, err, answered := answer(res, err, conv, nil); answered {
			return v, err
		}
		return nil, codemode.ToolErrorCause("the MCP session failed during the call", err)
	}}
	tools, _, _ := ts.namespace(list)
	return tools, nil
}
