package mcp

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestAnnotationsKept: an upstream's tool annotations reach the tools,
// with the MCP specification's defaults for hints left out, and show in
// the signatures.
func TestAnnotationsKept(t *testing.T) {
	yes, no := true, false
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "files", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	for _, tool := range []*mcpsdk.Tool{
		{Name: "read", InputSchema: obj, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}},
		{Name: "write", InputSchema: obj, Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}},
		{Name: "delete", InputSchema: obj, Annotations: &mcpsdk.ToolAnnotations{Title: "Delete a file"}},
		{Name: "plain", InputSchema: obj},
		{Name: "purge", InputSchema: obj, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}},
	} {
		srv.AddTool(tool, func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{}, nil
		})
	}
	st, ct := mcpsdk.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "host", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := SessionTools(context.Background(), cs, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*codemode.Annotations{
		"read":   {ReadOnly: true},
		"write":  {Idempotent: true},
		"delete": {Destructive: true, OpenWorld: true}, // the specification's defaults
		"plain":  nil,
		"purge":  {Destructive: true, OpenWorld: true}, // claims both: the stricter holds
	}
	for name, w := range want {
		if got := tools[name].(codemode.Tool).Annotations; !reflect.DeepEqual(got, w) {
			t.Errorf("%s: annotations %+v, want %+v", name, got, w)
		}
	}
	rt, err := codemode.New(codemode.Options{Tools: codemode.Tools{"files": tools}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	sigs := map[string]string{}
	for _, e := range rt.Catalog() {
		sigs[e.Path] = e.Signature
	}
	if !strings.Contains(sigs["files.read"], "@readonly") || !strings.Contains(sigs["files.delete"], "@destructive") ||
		!strings.Contains(sigs["files.delete"], "@openworld") || strings.Contains(sigs["files.plain"], "@") ||
		!strings.Contains(sigs["files.purge"], "@destructive") || strings.Contains(sigs["files.purge"], "@readonly") {
		t.Errorf("signatures: %v", sigs)
	}
}

// TestAnnotationsConflictingHints: an upstream tool whose hints say both
// read-only and destructive is taken as destructive, not read-only, so
// neither its signature nor a policy treats it as harmless.
func TestAnnotationsConflictingHints(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name string
		in   *mcpsdk.ToolAnnotations
		want *codemode.Annotations
	}{
		{"read-only", &mcpsdk.ToolAnnotations{ReadOnlyHint: true}, &codemode.Annotations{ReadOnly: true, OpenWorld: true}},
		{"read-only, not destructive", &mcpsdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no}, &codemode.Annotations{ReadOnly: true, OpenWorld: true}},
		{"read-only and destructive", &mcpsdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, &codemode.Annotations{Destructive: true, OpenWorld: true}},
		{"read-only, destructive, idempotent, closed", &mcpsdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no},
			&codemode.Annotations{Destructive: true, Idempotent: true}},
		{"destructive by default", &mcpsdk.ToolAnnotations{}, &codemode.Annotations{Destructive: true, OpenWorld: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := annotations(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
