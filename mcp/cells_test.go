package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/store"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func pager() codemode.Tools {
	return codemode.Tools{"pages": codemode.Tools{"get": codemode.Tool{Run: func(ctx context.Context, in json.RawMessage) (any, error) {
		select {
		case <-time.After(20 * time.Millisecond):
			return map[string]int{"items": 2}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}}}
}

const pagerProgram = `let n = 0
for (let i = 1; i <= 30; i++) { n += (await tools.pages.get({ i })).items; console.log("page " + i) }
return n`

// TestServerCells: execute answers after its yield time with a cell id
// while the program goes on; wait collects the rest, then the Result.
func TestServerCells(t *testing.T) {
	srv, err := NewServer(ServerOptions{Runtime: codemode.Options{Tools: pager(), Timeout: 20 * time.Second}, Cells: true, CellOptions: codemode.CellOptions{YieldBytes: 1 << 20}, MaxRuns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	cs := clientFor(t, srv, nil)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("tools: %v %v", tools, err)
	}
	_, sc := callExecute(t, cs, map[string]any{"code": pagerProgram, "yieldMs": 150})
	id, _ := sc["cellId"].(string)
	if sc["running"] != true || id == "" {
		t.Fatalf("first answer: %v", sc)
	}
	seen := len(sc["logs"].([]any))
	if seen >= 30 {
		t.Fatalf("the first answer has %d of 30 lines", seen)
	}
	// The tools change while the cell runs: the cell goes on, and wait
	// still finds it.
	more := pager()
	more["extra"] = codemode.Tools{"noop": codemode.Tool{Run: func(context.Context, json.RawMessage) (any, error) { return 1, nil }}}
	if err := srv.SetTools(more); err != nil {
		t.Fatal(err)
	}
	// With the one run slot held by the cell, another program waits.
	done := make(chan map[string]any, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: ExecuteTool, Arguments: map[string]any{"code": "return 7"}})
		if err != nil {
			done <- map[string]any{"error": err.Error()}
			return
		}
		done <- structured(t, res)
	}()
	select {
	case m := <-done:
		t.Fatalf("a second program ran while the cell held the only slot: %v", m)
	case <-time.After(100 * time.Millisecond):
	}
	for i := 0; ; i++ {
		if i > 50 {
			t.Fatal("the cell never ended")
		}
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: WaitTool, Arguments: map[string]any{"cellId": id, "timeoutMs": 200}})
		if err != nil {
			t.Fatal(err)
		}
		sc = structured(t, res)
		seen += len(sc["logs"].([]any))
		if sc["running"] != true {
			break
		}
	}
	if sc["ok"] != true || sc["value"] != 60.0 || seen != 30 {
		t.Fatalf("final answer %v after %d lines", sc, seen)
	}
	select {
	case m := <-done:
		if m["value"] != 7.0 {
			t.Fatalf("second program: %v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slot was not given back when the cell ended")
	}
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: WaitTool, Arguments: map[string]any{"cellId": id}})
	if err != nil {
		t.Fatal(err)
	}
	if sc := structured(t, res); !strings.Contains(sc["error"].(map[string]any)["message"].(string), "collected already") {
		t.Fatalf("wait for a collected cell: %v", sc)
	}
	// A program that ends within its yield answers as before.
	_, sc = callExecute(t, cs, map[string]any{"code": "// @exec: yield=5s\nreturn 1"})
	if sc["ok"] != true || sc["running"] != nil {
		t.Fatalf("quick program: %v", sc)
	}
}

func TestServerWithoutCellsHasNoWaitTool(t *testing.T) {
	srv := newServer(t, pager(), codemode.Options{})
	cs := clientFor(t, srv, nil)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools: %v %v", tools, err)
	}
	if d := tools.Tools[0].Description; strings.Contains(d, "yieldMs") {
		t.Fatal("the description offers yieldMs without cells")
	}
}

// TestServerCellsEndWithTheirSession: a cell left running stops when its
// HTTP session ends.
func TestServerCellsEndWithTheirSession(t *testing.T) {
	started := make(chan struct{}, 1)
	cancelled := make(chan struct{}, 1)
	block := codemode.Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- struct{}{}
		return nil, ctx.Err()
	}}
	srv, err := NewServer(ServerOptions{Runtime: codemode.Options{Timeout: time.Minute, Tools: codemode.Tools{"t": codemode.Tools{"block": block}}}, Cells: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(ts.Close)
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, sc := callExecute(t, cs, map[string]any{"code": `return await tools.t.block({})`, "yieldMs": 100})
	if sc["running"] != true {
		t.Fatalf("not running: %v", sc)
	}
	<-started
	select {
	case <-cancelled:
		t.Fatal("the cell stopped while its session was open")
	case <-time.After(100 * time.Millisecond):
	}
	_ = cs.Close() // ends the session
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the cell went on after its session ended")
	}
}

// TestServerSessionsKeepToThemselves: one client cannot collect another's
// cell, even with its id, and the owner still can; values stored in a
// session are dropped when it ends, so sessions that come and go leave
// nothing behind.
func TestServerSessionsKeepToThemselves(t *testing.T) {
	st := store.NewMemoryValues(0, 0)
	srv, err := NewServer(ServerOptions{Runtime: codemode.Options{Timeout: time.Minute, Values: st}, Cells: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(ts.Close)
	connect := func() *mcpsdk.ClientSession {
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	alice, mallory := connect(), connect()
	defer alice.Close()
	defer mallory.Close()
	_, sc := callExecute(t, alice, map[string]any{"code": `console.log("alice's secret"); await new Promise((r) => setTimeout(r, 300)); return "alice's"`, "yieldMs": 50})
	id, _ := sc["cellId"].(string)
	if sc["running"] != true || id == "" {
		t.Fatalf("not running: %v", sc)
	}
	res, err := mallory.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: WaitTool, Arguments: map[string]any{"cellId": id, "timeoutMs": 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if got := structured(t, res); got["ok"] != false || !strings.Contains(fmt.Sprint(got["error"]), "no running program has cellId") || strings.Contains(fmt.Sprint(got), "secret") {
		t.Fatalf("another session collected the cell: %v", got)
	}
	res, err = alice.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: WaitTool, Arguments: map[string]any{"cellId": id, "timeoutMs": 10000}})
	if err != nil {
		t.Fatal(err)
	}
	if got := structured(t, res); got["ok"] != true || got["value"] != "alice's" {
		t.Fatalf("the owner's wait: %v", got)
	}

	// Sessions that store values and go.
	for i := range 30 {
		cs := connect()
		_, sc := callExecute(t, cs, map[string]any{"code": `await tools.$codemode.store({ key: "k", value: "v".repeat(50000) }); return 1`})
		if sc["ok"] != true {
			t.Fatalf("session %d: %v", i, sc)
		}
		_ = cs.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.Sessions() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := st.Sessions(); n > 0 {
		t.Fatalf("%d ended sessions still hold values", n)
	}
}

// wait with terminate stops a running cell and answers with what it had
// done: the tool calls made and the lines printed since the last answer.
func TestWaitTerminates(t *testing.T) {
	srv, err := NewServer(ServerOptions{Runtime: codemode.Options{Tools: pager(), Timeout: 20 * time.Second}, Cells: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	cs := clientFor(t, srv, nil)
	_, sc := callExecute(t, cs, map[string]any{"code": pagerProgram, "yieldMs": 100})
	id, _ := sc["cellId"].(string)
	if sc["running"] != true {
		t.Fatalf("first answer: %v", sc)
	}
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: WaitTool, Arguments: map[string]any{"cellId": id, "terminate": true, "timeoutMs": 1}})
	if err != nil {
		t.Fatal(err)
	}
	sc = structured(t, res)
	calls, _ := sc["toolCalls"].([]any)
	if sc["running"] == true || sc["ok"] != false || len(calls) == 0 || len(calls) >= 30 {
		t.Fatalf("terminated: %v", sc)
	}
	if !strings.Contains(fmt.Sprint(sc["error"]), "stopped (wait with terminate)") {
		t.Fatalf("terminated without saying so: %v", sc)
	}
	res, err = cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: WaitTool, Arguments: map[string]any{"cellId": id, "terminate": true}})
	if err != nil {
		t.Fatal(err)
	}
	if sc := structured(t, res); !strings.Contains(fmt.Sprint(sc["error"]), "collected already") {
		t.Fatalf("terminating a collected cell: %v", sc)
	}
}
