package codemode

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestResultFit: Fit cuts a Result as a run's output limit would, names
// the budget it was given in its markers, and leaves the original alone.
func TestResultFit(t *testing.T) {
	// The same cut as MaxOutputBytes: a run under the limit and a run
	// without one, cut afterwards, read the same.
	programs := []string{
		`for (let i = 0; i < 20; i++) console.log("line " + i); return {n: 20}`,
		`for (let i = 0; i < 3; i++) console.log("line " + i); return "x".repeat(500)`,
		`console.log("a"); throw new Error("y".repeat(300))`,
	}
	free := mustNew(t, Options{})
	for _, limit := range []int{10, 60, 200, 1000} {
		limited := mustNew(t, Options{MaxOutputBytes: limit})
		for _, p := range programs {
			want, _ := limited.Execute(context.Background(), p)
			full, _ := free.Execute(context.Background(), p)
			got := full.Fit(limit, "")
			want.ToolCalls, got.ToolCalls = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("limit %d, %q:\n Fit %s\n run %s", limit, p, clip(got), clip(want))
			}
		}
	}

	// Named markers; the value first, then the lines that fit.
	r := Result{OK: true, Value: json.RawMessage(`1`), Logs: []string{"aaaa", "bbbb", "cccc", "dddd"}, ToolCalls: []ToolCall{}}
	got := r.Fit(20, "maxTokens")
	if !got.Truncated || !reflect.DeepEqual(got.Logs, []string{"aaaa", "bbbb", "cccc", "[1 more log lines cut by maxTokens]"}) {
		t.Fatalf("lines: %s", clip(got))
	}
	big := Result{OK: true, Value: json.RawMessage(`"` + strings.Repeat("v", 100) + `"`), Logs: []string{"a"}, ToolCalls: []ToolCall{}}
	got = big.Fit(40, "maxTokens")
	var s string
	if err := json.Unmarshal(got.Value, &s); err != nil || !got.Truncated ||
		!strings.Contains(s, "the result is 102 bytes of JSON, over the 40 bytes maxTokens allows") ||
		!reflect.DeepEqual(got.Logs, []string{"[1 more log lines cut by maxTokens]"}) {
		t.Fatalf("value: %s", clip(got))
	}
	if string(big.Value) != `"`+strings.Repeat("v", 100)+`"` || len(big.Logs) != 1 || big.Truncated {
		t.Fatalf("Fit changed the original: %s", clip(big))
	}
	failed := Result{Error: &Diagnostic{Kind: ExecutionFailure, Message: strings.Repeat("m", 100)}, ToolCalls: []ToolCall{}}
	got = failed.Fit(10, "maxTokens")
	if !got.Truncated || !strings.HasPrefix(got.Error.Message, "mmmmmmmmmm… [truncated: the message is 100 bytes, over the 10 bytes maxTokens allows]") ||
		len(failed.Error.Message) != 100 {
		t.Fatalf("message: %s; original %q", clip(got), failed.Error.Message)
	}
	// Within the budget, or with no budget, nothing changes.
	for _, n := range []int{0, 1000} {
		if got := r.Fit(n, "maxTokens"); !reflect.DeepEqual(got, r) {
			t.Fatalf("Fit(%d): %s", n, clip(got))
		}
	}
}
