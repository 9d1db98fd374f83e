package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// echoTools answers every call of echo with its input.
var echoTools = []Namespace{{Name: "tools", Members: [][]string{{"echo"}}, Admit: func(c Call) (Work, error) {
	return func(context.Context) (json.RawMessage, error) { return c.Input, nil }, nil
}}}

// cell runs program as a script in from's heap, keeping the heap.
func cell(t *testing.T, s *Sandbox, from *State, program string) Result {
	t.Helper()
	res, err := s.Run(context.Background(), Request{Program: program, Script: true, Keep: true, From: from,
		Bindings: echoTools, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("%q: %v", program, err)
	}
	return res
}

// TestKeptHeap: top-level declarations, tool paths and globals live on
// from one run to the next; a throw keeps what ran before it; a timeout
// keeps nothing.
func TestKeptHeap(t *testing.T) {
	s := newSandbox(t)
	res := cell(t, s, nil, "const x = 40\nlet seen = []\nfunction add(n) { seen.push(n); return x + n }\nadd(1)")
	if res.Failure != nil || string(res.Value) != "41" || res.Kept == nil {
		t.Fatalf("first cell: %s %+v kept %v", res.Value, res.Failure, res.Kept != nil)
	}
	res = cell(t, s, res.Kept, "const r = await tools.echo({ n: add(2) })\nseen.push(r.n);\n[seen, r]")
	if res.Failure != nil || string(res.Value) != `[[1,2,42],{"n":42}]` {
		t.Fatalf("second cell: %s %+v", res.Value, res.Failure)
	}
	res = cell(t, s, res.Kept, "globalThis.later = 'set'\nconst y = 1\nthrow new Error('boom')")
	if res.Failure == nil || res.Failure.Kind != Exception || res.Kept == nil {
		t.Fatalf("throwing cell: %+v kept %v", res.Failure, res.Kept != nil)
	}
	kept := res.Kept
	res = cell(t, s, kept, "[later, y, typeof x]")
	if res.Failure != nil || string(res.Value) != `["set",1,"number"]` {
		t.Fatalf("after a throw: %s %+v", res.Value, res.Failure)
	}
	// Declaring a name again is the program's error, as in a script.
	res = cell(t, s, res.Kept, "const x = 2")
	if res.Failure == nil || res.Failure.Name != "SyntaxError" {
		t.Errorf("redeclaring: %s %+v", res.Value, res.Failure)
	}
	// A run that times out keeps nothing; the earlier heap is still good.
	res2, err := s.Run(context.Background(), Request{Program: "while (true) {}", Script: true, Keep: true, From: kept,
		Bindings: echoTools, Timeout: 50 * time.Millisecond})
	if err != nil || res2.Failure == nil || res2.Failure.Kind != Timeout || res2.Kept != nil {
		t.Fatalf("timeout: %+v %v kept %v", res2.Failure, err, res2.Kept != nil)
	}
	if res = cell(t, s, kept, "x + 2"); string(res.Value) != "42" {
		t.Errorf("the earlier heap after a timeout: %s %+v", res.Value, res.Failure)
	}
	// The memory limit must be the heap's.
	if _, err := s.Run(context.Background(), Request{Program: "1", Script: true, From: kept, Bindings: echoTools, MemoryBytes: 32 << 20}); !errors.Is(err, ErrStateMismatch) {
		t.Errorf("another memory limit: %v", err)
	}
	// A kept heap over MaxStateBytes is not kept, and says why.
	res, err = s.Run(context.Background(), Request{Program: "globalThis.big = Array.from({ length: 1 << 17 }, () => Math.random()); 1", Script: true, Keep: true, From: kept,
		Bindings: echoTools, MaxStateBytes: 64 << 10})
	if err != nil || res.Kept != nil || res.KeepFailure == nil || res.KeepFailure.Kind != StateLimit || string(res.Value) != "1" {
		t.Errorf("over MaxStateBytes: %s kept %v %+v %v", res.Value, res.Kept != nil, res.KeepFailure, err)
	}
}
