// Package storetest checks implementations of the store interfaces
// against their contracts, as testing/fstest checks a file system: a
// store kept elsewhere (a networked key-value store, a database) passes
// the checks the stores of package store pass.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codemode-go/codemode/store"
)

// jsonOfLen returns a JSON string n bytes long (n >= 2).
func jsonOfLen(n int, fill byte) string {
	return `"` + strings.Repeat(string(fill), n-2) + `"`
}

func mustPut(t *testing.T, v store.Values, session, key, value string) {
	t.Helper()
	if err := v.Put(context.Background(), session, key, json.RawMessage(value)); err != nil {
		t.Fatalf("put %q %q: %v", session, key, err)
	}
}

func wantGet(t *testing.T, v store.Values, session, key, want string) {
	t.Helper()
	got, ok, err := v.Get(context.Background(), session, key)
	switch {
	case err != nil:
		t.Fatalf("get %q %q: %v", session, key, err)
	case want == "" && ok:
		t.Fatalf("get %q %q: got %s, want no value", session, key, got)
	case want != "" && (!ok || string(got) != want):
		t.Fatalf("get %q %q: got %.40s (ok %v), want %.40s", session, key, got, ok, want)
	}
}

func wantKeys(t *testing.T, v store.Values, session string, want ...string) {
	t.Helper()
	got, err := v.Keys(context.Background(), session)
	if err != nil {
		t.Fatalf("keys %q: %v", session, err)
	}
	if got == nil || !slices.Equal(got, append([]string{}, want...)) {
		t.Fatalf("keys %q: got %#v, want %q", session, got, want)
	}
}

// Values checks a store.Values against the contract of store.Values: open
// returns n handles on one new, empty store with the quotas given (n
// stores on one directory, n clients of one server), which the checks
// race as separate processes would.
func Values(t *testing.T, open func(t *testing.T, maxKeys, maxBytes, n int) []store.Values) {
	t.Run("contract", func(t *testing.T) { valuesContract(t, open) })
	t.Run("quota under concurrency", func(t *testing.T) { valuesQuota(t, open) })
}

func valuesContract(t *testing.T, open func(t *testing.T, maxKeys, maxBytes, n int) []store.Values) {
	ctx := context.Background()
	tests := []struct {
		name              string
		maxKeys, maxBytes int
		run               func(t *testing.T, v store.Values)
	}{
		{"put get overwrite delete", 0, 0, func(t *testing.T, v store.Values) {
			wantGet(t, v, "s", "k", "")
			mustPut(t, v, "s", "k", `{"page":3}`)
			wantGet(t, v, "s", "k", `{"page":3}`)
			mustPut(t, v, "s", "k", `[1,2]`)
			wantGet(t, v, "s", "k", `[1,2]`)
			mustPut(t, v, "s", "k", "")
			wantGet(t, v, "s", "k", "")
			wantKeys(t, v, "s")
			mustPut(t, v, "s", "k", "") // deleting what is not there
			mustPut(t, v, "s", "k", `1`)
			if err := v.Put(ctx, "s", "k", json.RawMessage{}); err != nil {
				t.Fatalf("put of an empty value: %v", err)
			}
			wantGet(t, v, "s", "k", "")
		}},
		{"keys sorted", 0, 0, func(t *testing.T, v store.Values) {
			wantKeys(t, v, "nobody")
			for _, k := range []string{"b", "é", "a/b", "B", "a", "..", "a b"} {
				mustPut(t, v, "s", k, `true`)
			}
			wantKeys(t, v, "s", "..", "B", "a", "a b", "a/b", "b", "é")
		}},
		{"key quota", 3, 0, func(t *testing.T, v store.Values) {
			for _, k := range []string{"a", "b", "c"} {
				mustPut(t, v, "s", k, `1`)
			}
			err := v.Put(ctx, "s", "d", json.RawMessage(`1`))
			if !errors.Is(err, store.ErrFull) || !strings.Contains(err.Error(), "3 keys") || !strings.Contains(err.Error(), "nil value") {
				t.Fatalf("a fourth key: got %v, want store.ErrFull naming the key quota and how to make room", err)
			}
			wantGet(t, v, "s", "d", "")
			mustPut(t, v, "s", "a", `2`) // not a new key
			mustPut(t, v, "s", "b", "")
			mustPut(t, v, "s", "d", `1`)
			wantKeys(t, v, "s", "a", "c", "d")
		}},
		{"byte quota counts keys and what an overwrite frees", 0, 100, func(t *testing.T, v store.Values) {
			mustPut(t, v, "s", "k", jsonOfLen(60, 'a'))
			mustPut(t, v, "s", "k", jsonOfLen(99, 'b')) // 1 + 99: the old value is not counted
			err := v.Put(ctx, "s", "j", json.RawMessage(`1`))
			if !errors.Is(err, store.ErrFull) || !strings.Contains(err.Error(), "100 bytes") || !strings.Contains(err.Error(), "nil value") {
				t.Fatalf("past the bytes: got %v, want store.ErrFull naming the byte quota and how to make room", err)
			}
			mustPut(t, v, "s", "k", jsonOfLen(97, 'c'))
			mustPut(t, v, "s", "j", `1`) // 1+97 + 1+1 = 100
			if err := v.Put(ctx, "s", "x", json.RawMessage(`1`)); !errors.Is(err, store.ErrFull) {
				t.Fatalf("a key past the bytes: got %v, want ErrFull", err)
			}
			if err := v.Put(ctx, "s", "k", json.RawMessage(jsonOfLen(99, 'd'))); !errors.Is(err, store.ErrFull) {
				t.Fatalf("an overwrite past the bytes: got %v, want ErrFull", err)
			}
			wantGet(t, v, "s", "k", jsonOfLen(97, 'c'))
			mustPut(t, v, "s", "k", "")
			mustPut(t, v, "s", "x", jsonOfLen(97, 'e'))
			wantKeys(t, v, "s", "j", "x")
		}},
		{"a value larger than a new session may hold", 0, 10, func(t *testing.T, v store.Values) {
			if err := v.Put(ctx, "s", "k", json.RawMessage(jsonOfLen(10, 'a'))); !errors.Is(err, store.ErrFull) {
				t.Fatalf("got %v, want ErrFull", err)
			}
			wantKeys(t, v, "s")
		}},
		{"bad keys", 0, 0, func(t *testing.T, v store.Values) {
			for _, key := range []string{"", strings.Repeat("k", store.MaxKeyBytes+1), "\xff", "a\x00b", "\xed\xa0\x80"} {
				if _, _, err := v.Get(ctx, "s", key); !errors.Is(err, store.ErrBadKey) {
					t.Errorf("get %q: got %v, want ErrBadKey", key, err)
				}
				if err := v.Put(ctx, "s", key, json.RawMessage(`1`)); !errors.Is(err, store.ErrBadKey) {
					t.Errorf("put %q: got %v, want ErrBadKey", key, err)
				}
				if err := v.Put(ctx, "s", key, nil); !errors.Is(err, store.ErrBadKey) {
					t.Errorf("delete %q: got %v, want ErrBadKey", key, err)
				}
			}
			wantKeys(t, v, "s")
			for _, key := range []string{strings.Repeat("k", store.MaxKeyBytes), strings.Repeat("é", store.MaxKeyBytes/2), "\t", `"`} {
				mustPut(t, v, "s", key, `1`)
				wantGet(t, v, "s", key, `1`)
			}
		}},
		{"too large", 0, 0, func(t *testing.T, v store.Values) {
			if err := v.Put(ctx, "s", "k", json.RawMessage(jsonOfLen(store.MaxValueBytes+1, 'a'))); !errors.Is(err, store.ErrTooLarge) {
				t.Fatalf("got %v, want ErrTooLarge", err)
			}
			wantKeys(t, v, "s")
			mustPut(t, v, "s", "k", jsonOfLen(store.MaxValueBytes, 'a'))
			wantGet(t, v, "s", "k", jsonOfLen(store.MaxValueBytes, 'a'))
		}},
		{"sessions are apart", 1, 0, func(t *testing.T, v store.Values) {
			sessions := []string{"", "a", "A", "a/b", `a\b`, "..", "../a", "a\x00b", "a\x00c", "é", "\xff", strings.Repeat("s", 5000), strings.Repeat("s", 5001)}
			for i, s := range sessions {
				mustPut(t, v, s, "k", strconv.Itoa(i)) // a quota of one key, per session
			}
			for i, s := range sessions {
				wantGet(t, v, s, "k", strconv.Itoa(i))
				wantKeys(t, v, s, "k")
			}
			if err := v.Drop(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			for i, s := range sessions {
				want := strconv.Itoa(i)
				if s == "a" {
					want = ""
				}
				wantGet(t, v, s, "k", want)
			}
		}},
		{"drop", 0, 0, func(t *testing.T, v store.Values) {
			for _, k := range []string{"a", "b", "c"} {
				mustPut(t, v, "s", k, `1`)
			}
			mustPut(t, v, "other", "a", `2`)
			for range 2 {
				if err := v.Drop(ctx, "s"); err != nil {
					t.Fatal(err)
				}
				wantKeys(t, v, "s")
				wantGet(t, v, "s", "a", "")
			}
			if err := v.Drop(ctx, "nobody"); err != nil {
				t.Fatal(err)
			}
			mustPut(t, v, "s", "b", `3`)
			wantKeys(t, v, "s", "b")
			wantGet(t, v, "other", "a", `2`)
		}},
		{"values are the caller's", 0, 0, func(t *testing.T, v store.Values) {
			in := json.RawMessage(`"abc"`)
			if err := v.Put(ctx, "s", "k", in); err != nil {
				t.Fatal(err)
			}
			in[1] = 'X'
			got, _, _ := v.Get(ctx, "s", "k")
			got[1] = 'Y'
			wantGet(t, v, "s", "k", `"abc"`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, open(t, tt.maxKeys, tt.maxBytes, 1)[0])
		})
	}
}

// valuesQuota: writers racing to fill one session
// never take it past its quotas, and every write acknowledged is there.
func valuesQuota(t *testing.T, open func(t *testing.T, maxKeys, maxBytes, n int) []store.Values) {
	ctx := context.Background()
	const writers = 8
	t.Run("keys", func(t *testing.T) {
		vs := open(t, 10, 0, 4)
		var mu sync.Mutex
		var acked []string
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range 5 {
					key := fmt.Sprintf("w%d-%d", w, i)
					err := vs[w%len(vs)].Put(ctx, "s", key, json.RawMessage(strconv.Quote(key)))
					switch {
					case err == nil:
						mu.Lock()
						acked = append(acked, key)
						mu.Unlock()
					case !errors.Is(err, store.ErrFull):
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		slices.Sort(acked)
		if len(acked) != 10 {
			t.Errorf("%d writes acknowledged, want 10 (the quota)", len(acked))
		}
		wantKeys(t, vs[0], "s", acked...)
		for _, k := range acked {
			wantGet(t, vs[0], "s", k, strconv.Quote(k))
		}
	})
	t.Run("bytes", func(t *testing.T) {
		const maxBytes = 600
		vs := open(t, 0, maxBytes, 4)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 1))
				v := vs[w%len(vs)]
				for range 12 {
					key := fmt.Sprintf("k%d", r.IntN(6))
					err := v.Put(ctx, "s", key, json.RawMessage(jsonOfLen(10+r.IntN(190), 'a'+byte(w))))
					if errors.Is(err, store.ErrFull) {
						err = v.Put(ctx, "s", fmt.Sprintf("k%d", r.IntN(6)), nil)
					}
					if err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		keys, err := vs[0].Keys(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, k := range keys {
			v, ok, err := vs[0].Get(ctx, "s", k)
			if err != nil || !ok {
				t.Fatalf("get %q, a key Keys lists: %v %v", k, ok, err)
			}
			total += len(k) + len(v)
		}
		if total > maxBytes {
			t.Fatalf("the session holds %d bytes, past its quota of %d", total, maxBytes)
		}
	})
}

// Runs checks a store.Runs against the contract of store.Runs: open returns a
// new, empty store.
func Runs(t *testing.T, open func(t *testing.T) store.Runs) {
	t.Run("contract", func(t *testing.T) { runsContract(t, open(t)) })
	t.Run("one winner", func(t *testing.T) { runsOneWinner(t, open(t)) })
}

func runsContract(t *testing.T, runs store.Runs) {
	ctx := context.Background()
	if _, _, err := runs.Get(ctx, "r1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get of nothing: %v", err)
	}
	rev, err := runs.Create(ctx, "r1", store.Run{Step: 1, Sum: "aa"})
	if err != nil || rev == 0 {
		t.Fatalf("create: %d %v", rev, err)
	}
	if _, err := runs.Create(ctx, "r1", store.Run{Step: 9}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	got, grev, err := runs.Get(ctx, "r1")
	if err != nil || grev != rev || got.Step != 1 || got.Sum != "aa" {
		t.Fatalf("get: %+v %d %v", got, grev, err)
	}
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	rev2, err := runs.Update(ctx, "r1", store.Run{Step: 1, Sum: "aa", TakenBy: "me", TakenAt: at}, rev)
	if err != nil || rev2 == rev {
		t.Fatalf("update: %d %v", rev2, err)
	}
	if _, err := runs.Update(ctx, "r1", store.Run{Step: 5}, rev); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update at a stale revision: %v", err)
	}
	if _, err := runs.Update(ctx, "r1", store.Run{Step: 5}, rev2+7); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update at a future revision: %v", err)
	}
	if err := runs.Delete(ctx, "r1", rev); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete at a stale revision: %v", err)
	}
	got, _, _ = runs.Get(ctx, "r1")
	if got.TakenBy != "me" || !got.TakenAt.Equal(at) {
		t.Fatalf("after update: %+v", got)
	}
	if err := runs.Delete(ctx, "r1", rev2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runs.Get(ctx, "r1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := runs.Update(ctx, "r1", store.Run{}, rev2); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update after delete: %v", err)
	}
	for _, bad := range []string{"", "../x", "a/b", `a\b`, ".", "..", "a b", strings.Repeat("a", store.MaxIDBytes+1), "é"} {
		if _, err := runs.Create(ctx, bad, store.Run{}); !errors.Is(err, store.ErrBadID) {
			t.Errorf("create %q: %v", bad, err)
		}
	}
}

// runsOneWinner: of many writers holding the same revision, exactly
// one moves the record on.
func runsOneWinner(t *testing.T, runs store.Runs) {
	ctx := context.Background()
	for round := range 20 {
		id := fmt.Sprintf("race%d", round)
		rev, err := runs.Create(ctx, id, store.Run{Step: 1})
		if err != nil {
			t.Fatal(err)
		}
		var wins, conflicts atomic.Int64
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				_, err := runs.Update(ctx, id, store.Run{Step: 1, TakenBy: fmt.Sprint(w)}, rev)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, store.ErrConflict):
					conflicts.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 || conflicts.Load() != 7 {
			t.Fatalf("round %d: %d wins, %d conflicts", round, wins.Load(), conflicts.Load())
		}
	}
}
