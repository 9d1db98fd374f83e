package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/redact"
	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DirectOptions configure [NewDirectServer].
type DirectOptions struct {
	// Name and Version identify the server to its clients. Empty means
	// "codemode" and "dev".
	Name, Version string

	// Logger receives the tools left out and why. Nil discards.
	Logger *slog.Logger

	// Upstreams are the MCP servers whose tools are served, each tool
	// forwarded to its server and its result passed back as the server
	// sent it (with the config's secrets redacted, as everywhere). Nil
	// means none.
	Upstreams *Upstreams

	// Tools are other tools (OpenAPI operations, say), served through
	// their Run functions: the input is checked against the tool's input
	// schema first, and the value comes back as JSON text, and as
	// structuredContent when it is an object. A tool whose input schema
	// uses named types (Tool.Types) or does not describe an object cannot
	// be described to an MCP client as it is, and is left out, logged.
	Tools codemode.Tools

	// Policy, when set, decides which tools are served: only those it
	// answers Allow for, asked with the tool's name, path and annotations
	// and no input, are listed; each call is asked again with its input
	// and refused unless allowed. A tool the policy would ask about or
	// deny is not served: there is no run to hold while someone decides.
	Policy func(context.Context, codemode.Call) codemode.Decision

	// MaxSessions and SessionIdleTimeout bound HTTPHandler's sessions, as
	// ServerOptions' do.
	MaxSessions        int
	SessionIdleTimeout time.Duration
}

// DirectServer serves tools directly, one MCP tool per tool, without
// code mode: the fallback for when the engine cannot start. Its tools
// are named after their paths, segments joined by "__" (everything__echo
// for tools.everything.echo), with characters MCP clients refuse
// replaced by "_".
type DirectServer struct {
	opts DirectOptions
	log  *slog.Logger
	mcp  *mcpsdk.Server

	mu       sync.Mutex
	served   map[string]string // MCP tool name → fingerprint of what it serves
	withheld string            // the tools the policy kept out, as last logged
}

// NewDirectServer makes a server of the tools opts give, listed now.
// Call Update when the upstream tools change (Upstreams.Changed).
func NewDirectServer(opts DirectOptions) *DirectServer {
	if opts.Name == "" {
		opts.Name = "codemode"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &DirectServer{opts: opts, log: log, served: map[string]string{}}
	d.mcp = mcpsdk.NewServer(&mcpsdk.Implementation{Name: opts.Name, Version: opts.Version}, &mcpsdk.ServerOptions{
		Instructions: "The code-mode engine could not start, so each tool is served directly: call the tools one at a time.",
		Logger:       log,
		Capabilities: &mcpsdk.ServerCapabilities{Tools: &mcpsdk.ToolCapabilities{ListChanged: true}},
	})
	d.Update()
	return d
}

// MCP returns the underlying SDK server, to Run on a transport.
func (d *DirectServer) MCP() *mcpsdk.Server { return d.mcp }

// HTTPHandler serves the server over streamable HTTP, with the session
// limits of DirectOptions. Call it once.
func (d *DirectServer) HTTPHandler() http.Handler {
	return sessionsHandler(d.mcp, d.log, d.opts.MaxSessions, d.opts.SessionIdleTimeout, 0, nil, nil)
}

// directTool is one tool to serve.
type directTool struct {
	path []string
	def  *mcpsdk.Tool
	call mcpsdk.ToolHandler
}

// Update lists the tools again and changes the served ones to match;
// clients are sent tools/list_changed when something changed.
func (d *DirectServer) Update() {
	d.mu.Lock()
	defer d.mu.Unlock()
	var withheld []string
	tools := map[string]directTool{}
	var order []string
	add := func(t directTool) {
		name := uniqueName(directName(t.path), tools)
		t.def.Name = name
		tools[name] = t
		order = append(order, name)
	}
	for _, t := range d.upstreamTools() {
		if !d.allowed(t.path, annotations(t.def.Annotations)) {
			withheld = append(withheld, strings.Join(t.path, "."))
			continue
		}
		add(t)
	}
	_ = d.opts.Tools.Walk(func(path []string, tool codemode.Tool) error {
		if !d.allowed(path, tool.Annotations) {
			withheld = append(withheld, strings.Join(path, "."))
			return nil
		}
		if t, ok := d.fixedTool(path, tool); ok {
			add(t)
		}
		return nil
	})
	if w := strings.Join(withheld, ","); w != d.withheld {
		d.withheld = w
		d.logWithheld(withheld)
	}
	var gone []string
	for name := range d.served {
		if _, ok := tools[name]; !ok {
			gone = append(gone, name)
			delete(d.served, name)
		}
	}
	if len(gone) > 0 {
		d.mcp.RemoveTools(gone...)
	}
	for _, name := range order {
		t := tools[name]
		fp := fingerprint(t)
		if d.served[name] == fp {
			continue
		}
		d.served[name] = fp
		d.mcp.AddTool(t.def, t.call)
	}
}

// logWithheld logs the tools the policy keeps out, if any.
func (d *DirectServer) logWithheld(withheld []string) {
	if len(withheld) > 0 {
		d.log.Warn("tools not served directly: the policy does not plainly allow them, and without the engine there is no run to ask about or hold", "tools", withheld)
	}
}

// fingerprint tells whether a tool changed since it was added.
func fingerprint(t directTool) string {
	b, _ := json.Marshal(struct {
		Path []string
		Def  *mcpsdk.Tool
	}{t.path, t.def})
	return string(b)
}

// allowed reports whether the policy plainly allows the tool at path.
func (d *DirectServer) allowed(path []string, a *codemode.Annotations) bool {
	if d.opts.Policy == nil {
		return true
	}
	dec := d.opts.Policy(context.Background(), codemode.Call{Name: strings.Join(path, "."), Path: path, Annotations: a})
	return dec.Verdict == codemode.Allow
}

// refused asks the policy about a call, with its input; a non-nil
// result refuses it.
func (d *DirectServer) refused(ctx context.Context, path []string, a *codemode.Annotations, input json.RawMessage) *mcpsdk.CallToolResult {
	if d.opts.Policy == nil {
		return nil
	}
	dec := d.opts.Policy(ctx, codemode.Call{Name: strings.Join(path, "."), Path: path, Input: input, Annotations: a})
	if dec.Verdict == codemode.Allow {
		return nil
	}
	reason := dec.Reason
	if reason == "" {
		reason = strings.Join(path, ".") + " is not allowed here"
	}
	return errorResult("refused by the policy: " + reason)
}

// upstreamTools are the tools of every upstream server, as listed.
func (d *DirectServer) upstreamTools() []directTool {
	u := d.opts.Upstreams
	if u == nil {
		return nil
	}
	var out []directTool
	for _, server := range u.names {
		up := u.ups[server]
		up.mu.Lock()
		raw := up.raw
		up.mu.Unlock()
		members := make([]string, 0, len(raw))
		for m := range raw {
			members = append(members, m)
		}
		slices.Sort(members)
		for _, member := range members {
			t := raw[member]
			path := []string{server, member}
			def := *t // a copy: the name is ours
			def.InputSchema = objectSchema(t.InputSchema, func(why string) {
				up.log.Warn("serving a tool directly with an empty input schema", "tool", t.Name, "reason", why)
			})
			a := annotations(t.Annotations)
			name := t.Name
			out = append(out, directTool{path: path, def: &def, call: func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				input := arguments(req)
				if res := d.refused(ctx, path, a, input); res != nil {
					return res, nil
				}
				res, err := up.callResult(ctx, name, input)
				if err != nil {
					return errorResult(up.red().Error(err).Error()), nil
				}
				return redactResult(res, up.red()), nil
			}})
		}
	}
	return out
}

// fixedTool serves a tool through its Run, when its input schema can be
// given to an MCP client as it is.
func (d *DirectServer) fixedTool(path []string, tool codemode.Tool) (directTool, bool) {
	skip := func(why string) (directTool, bool) {
		d.log.Warn("tool not served directly", "tool", strings.Join(path, "."), "reason", why)
		return directTool{}, false
	}
	in := tool.Input
	if in == nil {
		in = &jsonschema.Schema{Type: "object"}
	}
	if in.Type != "object" {
		return skip("its input schema does not describe an object")
	}
	// A schema that refers to named types (Tool.Types) only code mode
	// resolves would reach the client with references to nothing.
	resolved, err := in.Resolve(nil)
	if err != nil {
		return skip("its input schema does not stand on its own: " + err.Error())
	}
	if tool.SkipInputValidation {
		resolved = nil
	}
	def := &mcpsdk.Tool{Description: tool.Description, InputSchema: in, Annotations: mcpAnnotations(tool.Annotations)}
	if tool.Output != nil && tool.Output.Type == "object" {
		if _, err := tool.Output.Resolve(nil); err == nil {
			def.OutputSchema = tool.Output
		}
	}
	return directTool{path: path, def: def, call: func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		input := arguments(req)
		if res := d.refused(ctx, path, tool.Annotations, input); res != nil {
			return res, nil
		}
		if resolved != nil {
			var v any
			if err := json.Unmarshal(input, &v); err != nil {
				return errorResult("the input is not JSON: " + err.Error()), nil
			}
			if err := resolved.Validate(v); err != nil {
				return errorResult("invalid input: " + err.Error()), nil
			}
		}
		v, err := tool.Run(ctx, input)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		return valueResult(v)
	}}, true
}

// arguments are a call's arguments, {} when it has none.
func arguments(req *mcpsdk.CallToolRequest) json.RawMessage {
	if req.Params == nil || len(req.Params.Arguments) == 0 || string(req.Params.Arguments) == "null" {
		return json.RawMessage("{}")
	}
	return req.Params.Arguments
}

// valueResult is a tool's value as a result: JSON text (a string as
// itself), and structuredContent for an object.
func valueResult(v any) (*mcpsdk.CallToolResult, error) {
	if s, ok := v.(string); ok {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s}}}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return errorResult("the tool's value is not JSON: " + err.Error()), nil
	}
	res := &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: string(b)}}}
	if len(b) > 0 && b[0] == '{' {
		res.StructuredContent = json.RawMessage(b)
	}
	return res, nil
}

func errorResult(msg string) *mcpsdk.CallToolResult {
	return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: msg}}}
}

// redactResult is res with the config's secrets redacted from its text
// and structured content; everything else is passed on as it is.
func redactResult(res *mcpsdk.CallToolResult, red *redact.Redactor) *mcpsdk.CallToolResult {
	if res == nil {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{}}
	}
	if red.Empty() {
		return res
	}
	out := *res
	out.Content = make([]mcpsdk.Content, len(res.Content))
	for i, c := range res.Content {
		switch c := c.(type) {
		case *mcpsdk.TextContent:
			cc := *c
			cc.Text = red.String(c.Text)
			out.Content[i] = &cc
		case *mcpsdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				r := *c.Resource
				r.Text = red.String(r.Text)
				cc := *c
				cc.Resource = &r
				out.Content[i] = &cc
				continue
			}
			out.Content[i] = c
		default:
			out.Content[i] = c
		}
	}
	if res.StructuredContent != nil {
		out.StructuredContent = red.Value(res.StructuredContent)
	}
	return &out
}

// objectSchema is an upstream input schema if it describes an object,
// which the SDK requires of a tool's, else an empty object schema (the
// upstream validates the arguments anyway), after telling why.
func objectSchema(s any, replaced func(why string)) any {
	m, ok := s.(map[string]any)
	if !ok {
		b, err := json.Marshal(s)
		if err == nil && json.Unmarshal(b, &m) == nil && m != nil {
			ok = true
		}
	}
	switch {
	case !ok:
		replaced("not a JSON object")
	case m["type"] != "object":
		replaced(fmt.Sprintf("its type is %v, not object", m["type"]))
	default:
		return m
	}
	return map[string]any{"type": "object"}
}

// mcpAnnotations are codemode annotations as MCP hints; nil for none.
func mcpAnnotations(a *codemode.Annotations) *mcpsdk.ToolAnnotations {
	if a == nil {
		return nil
	}
	destructive, open := a.Destructive, a.OpenWorld
	return &mcpsdk.ToolAnnotations{
		ReadOnlyHint:    a.ReadOnly,
		DestructiveHint: &destructive,
		IdempotentHint:  a.Idempotent,
		OpenWorldHint:   &open,
	}
}

// maxNameBytes bounds a direct tool's name: MCP allows 128 characters,
// but some clients (model APIs among them) take no more than 64.
const maxNameBytes = 64

// directName names the tool at path for MCP: the segments joined by
// "__", each character other than ASCII letters, digits, "_" and "-"
// replaced by "_", and a name longer than maxNameBytes cut, with a hash
// of the path to tell cut names apart.
func directName(path []string) string {
	var b strings.Builder
	for i, seg := range path {
		if i > 0 {
			b.WriteString("__")
		}
		for _, r := range seg {
			if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		}
	}
	name := b.String()
	if len(name) > maxNameBytes {
		sum := sha256.Sum256([]byte(strings.Join(path, "\x00")))
		name = name[:maxNameBytes-9] + "_" + hex.EncodeToString(sum[:4])
	}
	return name
}

// uniqueName is name, or name with a number when another tool has it.
func uniqueName(name string, taken map[string]directTool) string {
	if _, ok := taken[name]; !ok {
		return name
	}
	for n := 2; ; n++ {
		suffix := "_" + strconv.Itoa(n)
		cand := name
		if len(cand)+len(suffix) > maxNameBytes {
			cand = cand[:maxNameBytes-len(suffix)]
		}
		cand += suffix
		if _, ok := taken[cand]; !ok {
			return cand
		}
	}
}
