package codemode

import (
	"context"
	"testing"
	"time"
)

func sleepTool(t *testing.T) Tool {
	t.Helper()
	tool, err := NewTool("Wait ms milliseconds.", func(ctx context.Context, in struct {
		Ms int `json:"ms"`
	}) (bool, error) {
		time.Sleep(time.Duration(in.Ms) * time.Millisecond)
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// Each call says when the program made it: a call made after another
// finished starts after it; calls made together start before the first
// of them ends.
func TestToolCallStart(t *testing.T) {
	rt := mustNew(t, Options{Tools: Tools{"clock": Tools{"sleep": sleepTool(t)}}})
	res := run(t, rt, `await tools.clock.sleep({ ms: 20 });
await tools.clock.sleep({ ms: 20 });
await Promise.all([tools.clock.sleep({ ms: 30 }), tools.clock.sleep({ ms: 30 }), tools.clock.sleep({ ms: 30 })]);
return 1`)
	if !res.OK || len(res.ToolCalls) != 5 {
		t.Fatalf("%+v", res)
	}
	c := res.ToolCalls
	for i := 1; i < 3; i++ {
		// Whole milliseconds: allow one for rounding.
		if c[i].StartMs+1 < c[i-1].StartMs+c[i-1].DurationMs {
			t.Errorf("call %d started at %d ms, before call %d ended (%d + %d ms)", i, c[i].StartMs, i-1, c[i-1].StartMs, c[i-1].DurationMs)
		}
	}
	for i := 3; i < 5; i++ {
		if c[i].StartMs > c[2].StartMs+c[2].DurationMs {
			t.Errorf("call %d, made with call 2, started at %d ms, after call 2 ended (%d + %d ms)", i, c[i].StartMs, c[2].StartMs, c[2].DurationMs)
		}
	}
}

// A resumed run, even in another Runtime, counts from its first step.
func TestToolCallStartAcrossResume(t *testing.T) {
	opts := Options{Tools: Tools{"clock": Tools{"sleep": sleepTool(t)}}, StateKey: testStateKey, Timeout: 10 * time.Second}
	first := mustNew(t, opts)
	ctx := context.Background()
	res, s, err := first.ExecuteSuspendable(ctx, `await tools.clock.sleep({ ms: 1 });
await tools.clock.sleep({ ms: 1 });
return 1`)
	if err != nil || s == nil {
		t.Fatalf("%+v %v", res, err)
	}
	time.Sleep(30 * time.Millisecond)
	second := mustNew(t, opts)
	for s != nil {
		var results []CallResult
		for _, p := range s.Pending {
			results = append(results, second.RunPending(ctx, p))
		}
		time.Sleep(30 * time.Millisecond)
		res, s, err = second.Resume(ctx, s.State, results...)
		if err != nil {
			t.Fatal(err)
		}
	}
	if !res.OK || len(res.ToolCalls) != 2 {
		t.Fatalf("%+v", res)
	}
	// The second call was made after the first resume, 60 ms or more
	// after the start.
	if c := res.ToolCalls; c[1].StartMs < c[0].StartMs+30 {
		t.Fatalf("the call after the resume started at %d ms, the first at %d ms: the resumed run did not count from its start", c[1].StartMs, c[0].StartMs)
	}
}

// A held call says where in the program it was made: the line of the
// tools call itself, in JavaScript and TypeScript, inside a function
// called from elsewhere, and still after a resume that answered another.
func TestPendingCallLocation(t *testing.T) {
	opts := Options{Tools: Tools{"clock": Tools{"sleep": sleepTool(t)}}, StateKey: testStateKey, Timeout: 10 * time.Second}
	rt := mustNew(t, opts)
	ctx := context.Background()
	for _, tc := range []struct {
		name, code string
		lines      []int
	}{
		{"js", "const a = 1;\n\nconst r = await tools.clock.sleep({ ms: 1 });\nreturn r", []int{3}},
		{"ts", "type N = number;\nconst ms: N = 1;\nconst r: boolean = await tools.clock.sleep({ ms });\nreturn r", []int{3}},
		{"nested", "function nap(ms: number) {\n  return tools.clock.sleep({ ms });\n}\n\nconst rs = await Promise.all([nap(1),\n  tools.clock.sleep({ ms: 2 })]);\nreturn rs", []int{2, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s, err := rt.ExecuteSuspendable(ctx, tc.code)
			if err != nil || s == nil || len(s.Pending) != len(tc.lines) {
				t.Fatalf("%+v %v", s, err)
			}
			for i, p := range s.Pending {
				if p.Location == nil || p.Location.Line != tc.lines[i] || p.Location.Column < 1 {
					t.Fatalf("call %d: location %+v, want line %d", i, p.Location, tc.lines[i])
				}
			}
			if len(s.Pending) < 2 {
				return
			}
			// Answer the first only: the second is still held, and still
			// located, in the next state (read by another Runtime).
			_, s2, err := rt.Resume(ctx, s.State, rt.RunPending(ctx, s.Pending[0]))
			if err != nil || s2 == nil {
				t.Fatalf("%+v %v", s2, err)
			}
			again, err := mustNew(t, opts).Inspect(s2.State)
			if err != nil || len(again.Pending) != 1 || again.Pending[0].Location == nil || again.Pending[0].Location.Line != tc.lines[1] {
				t.Fatalf("after a partial resume: %+v %v", again, err)
			}
		})
	}
}
