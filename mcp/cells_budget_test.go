package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// gate is a host tool that blocks until the test releases it, so that a
// program is still running, deterministically, while the test waits.
type gate struct{ called, release chan struct{} }

func newGate() *gate { return &gate{called: make(chan struct{}, 1), release: make(chan struct{})} }

func (g *gate) tools() codemode.Tools {
	return codemode.Tools{"gate": codemode.Tools{"pass": codemode.Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		g.called <- struct{}{}
		select {
		case <-g.release:
			return true, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}}}
}

func cellServer(t *testing.T, tools codemode.Tools) *mcpsdk.ClientSession {
	t.Helper()
	srv, err := NewServer(ServerOptions{Runtime: codemode.Options{Tools: tools, Timeout: time.Minute}, Cells: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return clientFor(t, srv, nil)
}

func callWait(t *testing.T, cs *mcpsdk.ClientSession, args map[string]any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: WaitTool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return structured(t, res)
}

// callWaitWithin is callWait that fails when the answer takes longer
// than d: a generous bound, for a wait that should not sleep at all.
func callWaitWithin(t *testing.T, cs *mcpsdk.ClientSession, args map[string]any, d time.Duration) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: WaitTool, Arguments: args})
	if err != nil {
		t.Fatalf("wait %v: %v", args, err)
	}
	return structured(t, res)
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestWaitBudgetHoldsLinesBack: a running cell's lines that do not fit a
// wait's maxTokens are held back, counted, and answered with first by the
// next wait, the final one included: across the answers every line comes
// once, in order.
func TestWaitBudgetHoldsLinesBack(t *testing.T) {
	g := newGate()
	cs := cellServer(t, g.tools())
	const code = `for (let i = 0; i < 40; i++) console.log("line " + String(i).padStart(2, "0"))
await tools.gate.pass({})
for (let i = 0; i < 3; i++) console.log("after " + i)
return "done"`
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("line %02d", i))
	}
	want = append(want, "after 0", "after 1", "after 2")

	const maxTokens = 10 // 40 bytes: five lines of "line NN"
	fits := func(sc map[string]any) []string {
		t.Helper()
		lines := strs(sc["logs"])
		n := 0
		for _, l := range lines {
			n += len(l) + 1
		}
		if n > maxTokens*codemode.BytesPerToken {
			t.Fatalf("%d bytes of lines over a budget of %d: %v", n, maxTokens*codemode.BytesPerToken, sc)
		}
		return lines
	}
	_, sc := callExecute(t, cs, map[string]any{"code": code, "yieldMs": 1, "maxTokens": maxTokens})
	id, _ := sc["cellId"].(string)
	if sc["running"] != true || id == "" {
		t.Fatalf("first answer: %v", sc)
	}
	got := fits(sc)
	<-g.called // every one of the 40 lines is printed now
	for i := range 3 {
		args := map[string]any{"cellId": id, "timeoutMs": 20, "maxTokens": maxTokens}
		if i > 0 {
			// Lines are held back: wait answers with them at once, not
			// after its default 30 s.
			delete(args, "timeoutMs")
		}
		sc = callWaitWithin(t, cs, args, 20*time.Second)
		lines := fits(sc)
		held, _ := sc["heldLines"].(float64)
		if sc["running"] != true || len(lines) == 0 || held == 0 || len(got)+len(lines)+int(held) != 40 {
			t.Fatalf("after %d lines: %v", len(got), sc)
		}
		got = append(got, lines...)
	}
	// The program ends; the final answer starts with the lines still held.
	close(g.release)
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("the cell never ended")
		}
		sc = callWait(t, cs, map[string]any{"cellId": id, "timeoutMs": 10000})
		got = append(got, strs(sc["logs"])...)
		if sc["running"] != true {
			break
		}
	}
	if sc["ok"] != true || sc["value"] != "done" || sc["truncated"] != nil {
		t.Fatalf("final answer: %v", sc)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lines across the answers:\n got %q\nwant %q", got, want)
	}
}

// TestWaitBudgetCutsTheResult: a cell that has ended answers a wait with
// its Result cut to maxTokens as the output limit cuts it, and execute's
// own answer is cut the same way.
func TestWaitBudgetCutsTheResult(t *testing.T) {
	g := newGate()
	cs := cellServer(t, g.tools())
	_, sc := callExecute(t, cs, map[string]any{"code": `await tools.gate.pass({})
for (let i = 0; i < 5; i++) console.log("line " + i)
return "x".repeat(200)`, "yieldMs": 1})
	id, _ := sc["cellId"].(string)
	if sc["running"] != true {
		t.Fatalf("first answer: %v", sc)
	}
	<-g.called
	close(g.release)
	sc = callWait(t, cs, map[string]any{"cellId": id, "timeoutMs": 30000, "maxTokens": 10})
	v, _ := sc["value"].(string)
	if sc["running"] != nil || sc["ok"] != true || sc["truncated"] != true ||
		!strings.Contains(v, "[truncated: the result is 202 bytes of JSON, over the 40 bytes maxTokens allows") ||
		!reflect.DeepEqual(strs(sc["logs"]), []string{"[5 more log lines cut by maxTokens]"}) {
		t.Fatalf("final answer: %v", sc)
	}

	_, sc = callExecute(t, cs, map[string]any{"code": `console.log("a"); console.log("b"); return 1`, "maxTokens": 1})
	if sc["ok"] != true || sc["value"] != 1.0 || sc["truncated"] != true ||
		!reflect.DeepEqual(strs(sc["logs"]), []string{"a", "[1 more log lines cut by maxTokens]"}) {
		t.Fatalf("execute's own answer: %v", sc)
	}
	_, sc = callExecute(t, cs, map[string]any{"code": `throw new Error("e".repeat(100))`, "maxTokens": 5})
	if msg := fmt.Sprint(sc["error"]); sc["ok"] != false || sc["truncated"] != true || !strings.Contains(msg, "over the 20 bytes maxTokens allows") {
		t.Fatalf("a failure's message: %v", sc)
	}
}

// TestWaitBudgetInvalid: a maxTokens that is not a whole number of at
// least 1 gets an answer that says so, from wait and from execute (whose
// program then does not run).
func TestWaitBudgetInvalid(t *testing.T) {
	g := newGate()
	cs := cellServer(t, g.tools())
	_, sc := callExecute(t, cs, map[string]any{"code": `await tools.gate.pass({}); return 1`, "yieldMs": 1})
	id, _ := sc["cellId"].(string)
	if sc["running"] != true {
		t.Fatalf("first answer: %v", sc)
	}
	<-g.called
	for _, bad := range []any{0, -3, 1.5, "10", true} {
		sc := callWait(t, cs, map[string]any{"cellId": id, "timeoutMs": 1, "maxTokens": bad})
		e, _ := sc["error"].(map[string]any)
		if sc["ok"] != false || e["kind"] != string(codemode.ParseError) || !strings.Contains(fmt.Sprint(e["message"]), "maxTokens must be a whole number of at least 1") {
			t.Fatalf("wait with maxTokens %v: %v", bad, sc)
		}
		_, sc = callExecute(t, cs, map[string]any{"code": `console.log("ran"); return 1`, "maxTokens": bad})
		if e, _ := sc["error"].(map[string]any); sc["ok"] != false || e["kind"] != string(codemode.ParseError) || !strings.Contains(fmt.Sprint(e["message"]), "maxTokens must be") || sc["logs"] != nil {
			t.Fatalf("execute with maxTokens %v: %v", bad, sc)
		}
	}
	// The cell is still there, and a valid budget collects it.
	close(g.release)
	sc = callWait(t, cs, map[string]any{"cellId": id, "timeoutMs": 30000, "maxTokens": 100})
	if sc["ok"] != true || sc["value"] != 1.0 {
		t.Fatalf("final answer: %v", sc)
	}
}

// TestFitLines: lines fit from the oldest; a first line longer than the
// whole budget goes in parts, cut at a character, so every answer makes
// progress and nothing is lost.
func TestFitLines(t *testing.T) {
	fit, held := fitLines([]string{"aaa", "bbb", "ccc"}, 8)
	if !reflect.DeepEqual(fit, []string{"aaa", "bbb"}) || !reflect.DeepEqual(held, []string{"ccc"}) {
		t.Fatalf("fit %q held %q", fit, held)
	}
	long := strings.Repeat("é", 10) // 20 bytes
	var parts []string
	lines := []string{long, "z"}
	for len(lines) > 0 {
		fit, lines = fitLines(lines, 8)
		if len(fit) == 0 {
			t.Fatal("no progress")
		}
		parts = append(parts, fit...)
	}
	if strings.Join(parts[:len(parts)-1], "") != long || parts[len(parts)-1] != "z" {
		t.Fatalf("parts %q", parts)
	}
	for _, p := range parts {
		if !utf8.ValidString(p) || len(p) > 7 {
			t.Fatalf("part %q", p)
		}
	}
}
