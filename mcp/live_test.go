package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLiveTicketUsedOnce drives a live round trip (a REPL cell whose
// call the policy asks about) by hand: the answer continues the run once;
// the same request state again, or in another session, makes no call.
func TestLiveTicketUsedOnce(t *testing.T) {
	var writes atomic.Int64
	tools := codemode.Tools{"files": codemode.Tools{
		"write": codemode.Tool{Run: func(context.Context, json.RawMessage) (any, error) { writes.Add(1); return "written", nil }},
	}}
	srv := newServerWith(t, ServerOptions{REPL: true, Runtime: codemode.Options{Tools: tools,
		Policy: codemode.Rules{Default: codemode.Ask}.Policy()}})
	manual := &mcpsdk.ClientOptions{
		MultiRoundTrip:     &mcpsdk.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) { return nil, nil },
	}
	cs := clientFor(t, srv, manual)
	const program = `await tools.files.write({ n: 1 });
"done"`
	call := func(cs *mcpsdk.ClientSession, state string) *mcpsdk.CallToolResult {
		t.Helper()
		p := &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": program}}
		if state != "" {
			p.RequestState = state
			p.InputResponses = mcpsdk.InputResponseMap{"0": &mcpsdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
		}
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := call(cs, "")
	if !first.NeedsInput() || first.RequestState == "" || writes.Load() != 0 {
		t.Fatalf("first answer: %+v (writes %d)", first, writes.Load())
	}
	if sc := structured(t, call(cs, first.RequestState)); sc["ok"] != true || sc["value"] != "done" || writes.Load() != 1 {
		t.Fatalf("approved: %v (writes %d)", sc, writes.Load())
	}
	for range 3 {
		if sc := structured(t, call(cs, first.RequestState)); sc["ok"] != false || !strings.Contains(fmt.Sprint(sc["error"]), "answered already") || writes.Load() != 1 {
			t.Fatalf("replayed: %v (writes %d)", sc, writes.Load())
		}
	}
	// In another session the state names nothing: the cell asks anew.
	other := clientFor(t, srv, manual)
	if res := call(other, first.RequestState); !res.NeedsInput() || writes.Load() != 1 {
		t.Fatalf("another session: %+v (writes %d)", res, writes.Load())
	}
}
