package codemode

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/codemode-go/codemode/internal/sandbox"
)

// TestImageSum: the sum names the image a state is taken against.
// Runtimes of one build agree on it whatever their options and tools. A
// Runtime whose image differs (here by a boot script, as another version
// of the prelude would make it) gives another sum, and refuses the
// states of the first with ErrStateEngine although the engine build, the
// tool tree and the key are the same: the sum is what tells a host, or a
// cluster, in advance.
func TestImageSum(t *testing.T) {
	ctx := context.Background()
	get := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	opts := Options{Tools: Tools{"x": Tools{"get": get}}, StateKey: testStateKey}
	a := mustNew(t, opts)
	sumA, err := a.ImageSum()
	if b, _ := hex.DecodeString(sumA); err != nil || len(b) != 32 {
		t.Fatalf("ImageSum: %q, %v; want 32 bytes in hex", sumA, err)
	}
	b := mustNew(t, Options{Tools: Tools{"y": Tools{"other": get}}, Timeout: 3 * time.Second, MaxMemoryBytes: 16 << 20})
	if sumB, err := b.ImageSum(); err != nil || sumB != sumA {
		t.Errorf("another Runtime of this build: %q, %v; want %q", sumB, err, sumA)
	}
	if again, _ := a.ImageSum(); again != sumA {
		t.Errorf("asked again: %q, want %q", again, sumA)
	}

	_, s, err := a.ExecuteSuspendable(ctx, `return (await tools.x.get({ n: 1 })).n + 1`)
	if err != nil || s == nil {
		t.Fatalf("not suspended: %v", err)
	}
	reply := CallResult{Index: s.Pending[0].Index, Output: json.RawMessage(`{"n":41}`)}

	other, err := sandbox.New(ctx, sandbox.Options{BootScript: `Object.defineProperty(globalThis, "bootMark", { value: 1 })`})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() }) // after c's Close, which cleans up first
	c := mustNew(t, opts)
	c.sb = other
	sumC, err := c.ImageSum()
	if err != nil || sumC == sumA || len(sumC) != len(sumA) {
		t.Fatalf("another image: %q, %v; want a sum other than %q", sumC, err, sumA)
	}
	if c.ToolTreeSum() != a.ToolTreeSum() {
		t.Fatal("the tool trees differ: the test would not isolate the image")
	}
	if _, err := c.Inspect(s.State); err != nil {
		t.Fatalf("the state opens on the other image's Runtime (same engine, tools and key): %v", err)
	}
	if _, _, err := c.Resume(ctx, s.State, reply); !errors.Is(err, ErrStateEngine) {
		t.Errorf("resumed on another image: got %v, want ErrStateEngine", err)
	}
	res, _, err := a.Resume(ctx, s.State, reply)
	if err != nil || !res.OK || string(res.Value) != "42" {
		t.Errorf("resumed on its own image: %+v, %v; want 42", res, err)
	}
}
