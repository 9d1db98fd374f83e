package mcp

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// directSession serves d to a client in memory; changed receives its
// tools/list_changed.
func directSession(t *testing.T, d *DirectServer) (*mcpsdk.ClientSession, <-chan struct{}) {
	t.Helper()
	st, ct := mcpsdk.NewInMemoryTransports()
	ss, err := d.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	changed := make(chan struct{}, 16)
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "client", Version: "1"}, &mcpsdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	}).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, changed
}

func listDirect(t *testing.T, cs *mcpsdk.ClientSession) map[string]*mcpsdk.Tool {
	t.Helper()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcpsdk.Tool{}
	for _, tool := range list.Tools {
		out[tool.Name] = tool
	}
	return out
}

func callDirect(t *testing.T, cs *mcpsdk.ClientSession, name string, args any) *mcpsdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func directText(res *mcpsdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcpsdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestDirectServer: the kit's tools and a local tool are served one MCP
// tool each, named after their paths; upstream results come back as the
// server sent them, secrets redacted; a local tool's input is checked
// against its schema; the policy keeps out what it does not plainly
// allow; and a tool the server adds later is served after Update.
func TestDirectServer(t *testing.T) {
	const secret = "kit-secret-0123456789abcdef"
	u := connect(t, &Config{Servers: map[string]UpstreamConfig{"kit": kitConfig(t, map[string]string{"KIT_API_TOKEN": secret})}}, ClientOptions{})
	add := codemode.Tool{
		Description: "Adds a and b.",
		Input: &jsonschema.Schema{Type: "object", Required: []string{"a", "b"}, Properties: map[string]*jsonschema.Schema{
			"a": {Type: "integer"}, "b": {Type: "integer"},
		}},
		Annotations: &codemode.Annotations{ReadOnly: true},
		Run: func(_ context.Context, in json.RawMessage) (any, error) {
			var v struct{ A, B int }
			if err := json.Unmarshal(in, &v); err != nil {
				return nil, err
			}
			return map[string]int{"sum": v.A + v.B}, nil
		},
	}
	rules := codemode.Rules{Default: codemode.Allow, Tools: map[string]codemode.Verdict{"kit.multi": codemode.Deny, "kit.fail": codemode.Ask}}
	logger, logs := newLogRecorder()
	d := NewDirectServer(DirectOptions{Upstreams: u, Tools: codemode.Tools{"calc": codemode.Tools{"add": add}}, Policy: rules.Policy(), Logger: logger})
	cs, _ := directSession(t, d)

	tools := listDirect(t, cs)
	for _, want := range []string{"kit__echo", "kit__structured", "kit__weird_name_x", "kit__then_", "kit__env", "calc__add"} {
		if tools[want] == nil {
			t.Errorf("%s is not served: %v", want, sortedKeys(tools))
		}
	}
	for _, gone := range []string{"kit__multi", "kit__fail", "execute"} {
		if tools[gone] != nil {
			t.Errorf("%s is served", gone)
		}
	}
	if !strings.Contains(logs(), "kit.multi") || !strings.Contains(logs(), "kit.fail") {
		t.Errorf("the withheld tools are not logged:\n%s", logs())
	}
	if a := tools["calc__add"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("calc__add annotations %+v", a)
	}

	// Results pass through as the server sent them.
	res := callDirect(t, cs, "kit__structured", map[string]any{})
	if directText(res) != "ignored" {
		t.Errorf("structured: text %q", directText(res))
	}
	if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"items":["a","b","c"],"total":3}` {
		t.Errorf("structured: structuredContent %s", b)
	}
	if got := directText(callDirect(t, cs, "kit__then_", map[string]any{})); got == "" {
		t.Errorf("then_ did not reach the tool then")
	}
	if res := callDirect(t, cs, "kit__rpc_error", map[string]any{}); !res.IsError {
		t.Errorf("rpc_error: %+v", res)
	}
	// The config's secrets stay out of what the client sees.
	if got := directText(callDirect(t, cs, "kit__env", map[string]any{})); strings.Contains(got, secret) || !strings.Contains(got, "KIT_API_TOKEN") {
		t.Errorf("env: %s", got)
	}
	// The policy is asked again at the call: a withheld tool is unknown.
	if res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "kit__multi", Arguments: map[string]any{}}); err == nil && !res.IsError {
		t.Errorf("multi could be called: %+v", res)
	}

	// A local tool: input checked, value as JSON text and structure.
	res = callDirect(t, cs, "calc__add", map[string]any{"a": 1, "b": 2})
	if res.IsError || directText(res) != `{"sum":3}` {
		t.Errorf("add: %+v %q", res, directText(res))
	}
	if res := callDirect(t, cs, "calc__add", map[string]any{"a": "one", "b": 2}); !res.IsError || !strings.Contains(directText(res), "invalid input") {
		t.Errorf("add with a string: %+v %q", res, directText(res))
	}

	// A tool added upstream is served after Update.
	added := directText(callDirect(t, cs, "kit__add_tool", map[string]any{}))
	select {
	case <-u.Changed():
	case <-time.After(30 * time.Second): // a guard, not a measure
		t.Fatal("the kit's new tool was never announced")
	}
	d.Update()
	if tools := listDirect(t, cs); tools["kit__"+added] == nil {
		t.Errorf("%s is not served after Update: %v", added, sortedKeys(tools))
	}
	if got := directText(callDirect(t, cs, "kit__"+added, map[string]any{})); got != added+" ok" {
		t.Errorf("%s answered %q", added, got)
	}
}

// TestDirectFixedToolsSkipped: a local tool whose input schema cannot be
// given to a client as it is (not an object, or referring to schemas it
// does not hold) is left out and logged.
func TestDirectFixedToolsSkipped(t *testing.T) {
	run := func(context.Context, json.RawMessage) (any, error) { return "ok", nil }
	logger, logs := newLogRecorder()
	d := NewDirectServer(DirectOptions{Logger: logger, Tools: codemode.Tools{"api": codemode.Tools{
		"list":  codemode.Tool{Run: run},
		"array": codemode.Tool{Run: run, Input: &jsonschema.Schema{Type: "array"}},
		"typed": codemode.Tool{Run: run, Input: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"x": {Ref: "#/$defs/Pet"}}}},
	}}})
	cs, _ := directSession(t, d)
	tools := listDirect(t, cs)
	if len(tools) != 1 || tools["api__list"] == nil {
		t.Errorf("got tools %v, want api__list", sortedKeys(tools))
	}
	for _, want := range []string{"api.array", "api.typed"} {
		if !strings.Contains(logs(), want) {
			t.Errorf("%s's absence is not logged:\n%s", want, logs())
		}
	}
	if got := directText(callDirect(t, cs, "api__list", nil)); got != "ok" {
		t.Errorf("list answered %q", got)
	}
}

func TestDirectName(t *testing.T) {
	long := strings.Repeat("a", 80)
	for _, tc := range []struct {
		path []string
		want string
	}{
		{[]string{"everything", "echo"}, "everything__echo"},
		{[]string{"kit", "weird/name.x"}, "kit__weird_name_x"},
		{[]string{"files", "get-file"}, "files__get-file"},
		{[]string{"café", "thé"}, "caf___th_"},
	} {
		if got := directName(tc.path); got != tc.want {
			t.Errorf("directName(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
	a, b := directName([]string{"x", long + "1"}), directName([]string{"x", long + "2"})
	if len(a) != maxNameBytes || len(b) != maxNameBytes || a == b {
		t.Errorf("long names %q and %q", a, b)
	}
	taken := map[string]directTool{"a__b": {}, "a__b_2": {}}
	if got := uniqueName("a__b", taken); got != "a__b_3" {
		t.Errorf("uniqueName = %q", got)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
