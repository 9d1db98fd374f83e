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
	no := false
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "files", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	for _, tool := range []*mcpsdk.Tool{
		{Name: "read", InputSchema: obj, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}},
		{Name: "write", InputSchema: obj, Annotations: &mcpsdk.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}},
		{Name: "delete", InputSchema: obj, Annotations: &mcpsdk.ToolAnnotations{Title: "Delete a file"}},
		{Name: "plain", InputSchema: obj},
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
		!strings.Contains(sigs["files.delete"], "@openworld") || strings.Contains(sigs["files.plain"], "@") {
		t.Errorf("signatures: %v", sigs)
	}
}
