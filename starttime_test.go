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
