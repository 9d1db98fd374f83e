package codemode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/codemode-go/codemode/store"
)

// TestStepsRunOnce: a step runs at most once whoever resumes it —
// the same state twice, an older state after the run moved on, many
// goroutines at once, a state of a run that ended, a state the store does
// not know — over either run store.
func TestStepsRunOnce(t *testing.T) {
	dir, err := store.OpenDirRuns(filepath.Join(t.TempDir(), "runs"))
	if err != nil {
		t.Fatal(err)
	}
	for name, runs := range map[string]store.Runs{"memory": &store.MemoryRuns{}, "dir": dir, "memory, compacted": &store.MemoryRuns{}} {
		compact := strings.HasSuffix(name, "compacted")
		t.Run(name, func(t *testing.T) {
			var writes atomic.Int64
			tools := Tools{"bank": Tools{"pay": Tool{Run: func(context.Context, json.RawMessage) (any, error) {
				return writes.Add(1), nil
			}}}}
			rt := mustNew(t, Options{Tools: tools, StateKey: testStateKey})
			d := Steps{Runtime: rt, Runs: runs, Owner: "test", CompactStates: compact, KeepStates: compact}
			ctx := context.Background()
			code := `const a = await tools.bank.pay({ to: "a" }); const b = await tools.bank.pay({ to: "b" }); return [a, b]`
			approve := func(ctx context.Context, s *Suspended) ([]CallResult, error) {
				var rs []CallResult
				for _, p := range s.Pending {
					rs = append(rs, rt.RunPending(ctx, p))
				}
				return rs, nil
			}
			_, first, err := d.Start(ctx, code)
			if err != nil || first == nil {
				t.Fatal(err)
			}
			if compact {
				// The state handed out is the compacted one, and the one
				// kept; the uncompacted form of the step would not be it.
				kept, _, err := d.State(ctx, first.RunID)
				if !bytes.HasPrefix(first.State, []byte("CMQJSNZ1")) || err != nil || !bytes.Equal(kept, first.State) {
					t.Fatalf("compacted: state begins %q; kept %d bytes, %v", first.State[:8], len(kept), err)
				}
			}
			// Many takers of the first step at once: one makes the call.
			var wg sync.WaitGroup
			var won atomic.Int64
			var second *Suspended
			var mu sync.Mutex
			for range 8 {
				wg.Go(func() {
					_, s, err := d.Resume(ctx, first.State, approve)
					switch {
					case err == nil:
						won.Add(1)
						mu.Lock()
						second = s
						mu.Unlock()
					case !errors.Is(err, ErrStepTaken):
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if won.Load() != 1 || writes.Load() != 1 || second == nil {
				t.Fatalf("%d takers won, %d writes", won.Load(), writes.Load())
			}
			// The first state again, now that the run is at its second step.
			if _, _, err := d.Resume(ctx, first.State, approve); !errors.Is(err, ErrStepTaken) || writes.Load() != 1 {
				t.Fatalf("replayed first step: %v, %d writes", err, writes.Load())
			}
			res, s, err := d.Resume(ctx, second.State, approve)
			if err != nil || s != nil || string(res.Value) != "[1,2]" {
				t.Fatalf("%v %s", err, clip(res))
			}
			// The run has ended: none of its states runs again.
			for _, st := range [][]byte{first.State, second.State} {
				if _, _, err := d.Resume(ctx, st, approve); !errors.Is(err, ErrStepTaken) || writes.Load() != 2 {
					t.Fatalf("replay after the end: %v, %d writes", err, writes.Load())
				}
			}
			// A state made without the store is not known to it.
			_, loose, _ := rt.ExecuteSuspendable(ctx, code)
			if _, _, err := d.Resume(ctx, loose.State, approve); !errors.Is(err, ErrStepTaken) {
				t.Fatalf("unrecorded state: %v", err)
			}
			// A damaged state is refused before the store is read.
			bad := append([]byte{}, second.State...)
			bad[len(bad)/2] ^= 1
			if _, _, err := d.Resume(ctx, bad, approve); !errors.Is(err, ErrStateInvalid) {
				t.Fatalf("damaged state: %v", err)
			}
			// An answer that fails leaves the step taken: it is not
			// handed out again, since the answer may have made calls.
			_, s, _ = d.Start(ctx, code)
			failing := func(ctx context.Context, s *Suspended) ([]CallResult, error) {
				rt.RunPending(ctx, s.Pending[0])
				return nil, errors.New("the approver crashed")
			}
			if _, _, err := d.Resume(ctx, s.State, failing); err == nil || errors.Is(err, ErrStepTaken) {
				t.Fatalf("failing answer: %v", err)
			}
			before := writes.Load()
			if _, _, err := d.Resume(ctx, s.State, approve); !errors.Is(err, ErrStepTaken) || writes.Load() != before {
				t.Fatalf("after a failed answer: %v, %d more writes", err, writes.Load()-before)
			}
		})
	}
}

// TestCallFromContext: a tool reads its call from its context — the run
// id and the call's index — the same in Execute and in a pending call
// made by RunPending in another Runtime, so an idempotency key derived
// from them names one call wherever it runs.
func TestCallFromContext(t *testing.T) {
	key := Tool{Run: func(ctx context.Context, _ json.RawMessage) (any, error) {
		c, ok := CallFrom(ctx)
		if !ok || c.RunID == "" {
			return nil, errors.New("no call in the context")
		}
		return fmt.Sprintf("%s/%d %s", c.RunID[:4], c.Index, c.Name), nil
	}}
	opts := Options{Tools: Tools{"t": Tools{"key": key}}, StateKey: testStateKey}
	rt := mustNew(t, opts)
	code := `return [await tools.t.key({}), await tools.t.key({})]`
	res, _ := rt.Execute(context.Background(), code)
	var keys []string
	if err := json.Unmarshal(res.Value, &keys); err != nil || len(keys) != 2 || keys[0][:4] != keys[1][:4] || !strings.HasSuffix(keys[0], "/0 t.key") || !strings.HasSuffix(keys[1], "/1 t.key") {
		t.Fatalf("%s", clip(res))
	}
	res2, _ := rt.Execute(context.Background(), code)
	if string(res2.Value)[:7] == string(res.Value)[:7] {
		t.Fatalf("two runs share a run id: %s %s", res.Value, res2.Value)
	}
	_, s, err := rt.ExecuteSuspendable(context.Background(), code)
	if err != nil || s == nil {
		t.Fatal(err)
	}
	for s != nil {
		other := mustNew(t, opts)
		r := other.RunPending(context.Background(), s.Pending[0])
		if want := fmt.Sprintf(`"%s/%d t.key"`, s.RunID[:4], s.Pending[0].Index); string(r.Output) != want {
			t.Fatalf("pending call saw %s, want %s", r.Output, want)
		}
		res, s, err = other.Resume(context.Background(), s.State, r)
		if err != nil {
			t.Fatal(err)
		}
	}
}
