package codemode

import (
	"context"
	"errors"
	"testing"

	"github.com/codemode-go/codemode/store"
)

// TestZeroValues: the zero values of the session types are ready to use
// or refuse with a named error; none panics, and none grants more than
// its documented default.
func TestZeroValues(t *testing.T) {
	ctx := context.Background()
	var v store.MemoryValues
	if err := v.Put(ctx, "s", "k", []byte(`1`)); err != nil {
		t.Fatalf("zero MemoryValues: %v", err)
	}
	if got, ok, _ := v.Get(ctx, "s", "k"); !ok || string(got) != "1" {
		t.Fatalf("zero MemoryValues kept %q %v", got, ok)
	}
	var cs Cells
	rt := mustNew(t, Options{})
	id, err := cs.Start(ctx, rt, "return 1")
	if err != nil {
		t.Fatalf("zero Cells: %v", err)
	}
	if u, err := cs.Wait(ctx, id, 0); err != nil || !u.Done || string(u.Result.Value) != "1" {
		t.Fatalf("zero Cells wait: %+v %v", u, err)
	}
	var st Steps
	if _, _, err := st.Start(ctx, "return 1"); !errors.Is(err, ErrNoRunStore) {
		t.Fatalf("zero Steps: %v", err)
	}
	if _, _, err := (Steps{Runtime: rt}).Resume(ctx, nil, nil); !errors.Is(err, ErrNoRunStore) {
		t.Fatalf("Steps without Runs: %v", err)
	}
	var runs store.MemoryRuns
	if _, err := runs.Create(ctx, "r", store.Run{Step: 1}); err != nil {
		t.Fatalf("zero MemoryRuns: %v", err)
	}
}
