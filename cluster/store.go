package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/codemode-go/codemode/store"
	"github.com/nats-io/nats.go/jetstream"
)

// Runs returns a store.Runs in the cluster's KV bucket CM_STEPS, shared by
// every process of the cluster: codemode.Steps on it lets a suspended run
// (one that waits for an approval, say) be resumed on any front, by
// exactly one.
func (n *Node) Runs() store.Runs { return kvRuns{n.stp} }

type kvRuns struct{ kv bkv }

func stepKey(id string) (string, error) {
	if err := store.CheckID(id); err != nil {
		return "", err
	}
	return "s." + id, nil
}

func (r kvRuns) Get(ctx context.Context, id string) (store.Run, uint64, error) {
	key, err := stepKey(id)
	if err != nil {
		return store.Run{}, 0, err
	}
	e, err := r.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return store.Run{}, 0, store.ErrNotFound
	}
	if err != nil {
		return store.Run{}, 0, err
	}
	var run store.Run
	if err := json.Unmarshal(e.Value(), &run); err != nil {
		return store.Run{}, 0, fmt.Errorf("cluster: the record of run %s: %w", id, err)
	}
	return run, e.Revision(), nil
}

func (r kvRuns) Create(ctx context.Context, id string, run store.Run) (uint64, error) {
	key, err := stepKey(id)
	if err != nil {
		return 0, err
	}
	rev, err := r.kv.Create(ctx, key, mustJSON(run))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, store.ErrExists
	}
	return rev, err
}

func (r kvRuns) Update(ctx context.Context, id string, run store.Run, rev uint64) (uint64, error) {
	key, err := stepKey(id)
	if err != nil {
		return 0, err
	}
	next, err := r.kv.Update(ctx, key, mustJSON(run), rev)
	if isConflict(err) {
		return 0, store.ErrConflict
	}
	return next, err
}

func (r kvRuns) Delete(ctx context.Context, id string, rev uint64) error {
	key, err := stepKey(id)
	if err != nil {
		return err
	}
	if err := r.kv.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil {
		if isConflict(err) {
			return store.ErrConflict
		}
		return err
	}
	return nil
}

// isConflict reports a compare-and-swap that found another revision.
func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Values returns a store.Values in the cluster's KV bucket CM_VALUES, with
// the quotas given (zero means 1,000 keys and 1 MiB per session): the
// values programs keep for their session, the same on every front and
// worker. Each session has an index (its keys and their sizes) that every
// write replaces by compare-and-swap, so the quotas hold across
// processes; Keys reads the index, never a listing of the bucket.
func (n *Node) Values(maxKeys, maxBytes int) store.Values {
	return &kvValues{kv: n.vals, maxKeys: maxKeys, maxBytes: maxBytes}
}

type kvValues struct {
	kv                bkv
	maxKeys, maxBytes int
}

// Keys of the bucket are hashes: sessions and keys are any text, and a
// KV key allows few characters. Each value is written once under a key
// of its own, which the session's index names: a write that loses the
// index's compare-and-swap leaves no trace in what the index says, so the
// index's sizes are the values' sizes whatever the interleaving.
func hashed(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:20])
}

func indexKey(session string) string     { return "i." + hashed(session) }
func valueKey(session, id string) string { return "v." + hashed(session) + "." + id }

// ref is an index entry: a value's size and the id it is kept under.
type ref struct {
	N  int    `json:"n"`
	ID string `json:"id"`
}

func (v *kvValues) index(ctx context.Context, session string) (map[string]ref, uint64, error) {
	e, err := v.kv.Get(ctx, indexKey(session))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return map[string]ref{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	x := map[string]ref{}
	if err := json.Unmarshal(e.Value(), &x); err != nil {
		return nil, 0, fmt.Errorf("cluster: the index of a session's values: %w", err)
	}
	return x, e.Revision(), nil
}

func sizes(x map[string]ref) store.Index {
	out := make(store.Index, len(x))
	for k, r := range x {
		out[k] = r.N
	}
	return out
}

func (v *kvValues) Get(ctx context.Context, session, key string) (json.RawMessage, bool, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, false, err
	}
	for range 10 {
		x, _, err := v.index(ctx, session)
		if err != nil {
			return nil, false, err
		}
		r, ok := x[key]
		if !ok {
			return nil, false, nil
		}
		e, err := v.kv.Get(ctx, valueKey(session, r.ID))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // replaced between the two reads: read the index again
		}
		if err != nil {
			return nil, false, err
		}
		return json.RawMessage(e.Value()), true, nil
	}
	return nil, false, errors.New("cluster: the value keeps changing under the read; try again")
}

func (v *kvValues) Put(ctx context.Context, session, key string, value json.RawMessage) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if len(value) > store.MaxValueBytes {
		return fmt.Errorf("%w: it is %d bytes of JSON; a value may have %d", store.ErrTooLarge, len(value), store.MaxValueBytes)
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			// Another write to the session won: back off a little, by
			// chance, so that racing writers spread out.
			select {
			case <-ctx.Done():
				return fmt.Errorf("cluster: the session's values are being written by many writers at once: %w", ctx.Err())
			case <-time.After(time.Duration(rand.Int64N(int64(min(attempt, 20)) * int64(time.Millisecond)))):
			}
		}
		x, rev, err := v.index(ctx, session)
		if err != nil {
			return err
		}
		old, had := x[key]
		next := maps.Clone(x)
		id := ""
		if len(value) == 0 {
			if !had {
				return nil
			}
			delete(next, key)
		} else {
			if err := sizes(x).Admit(v.maxKeys, v.maxBytes, key, len(value)); err != nil {
				return err
			}
			id = newID()
			if _, err := v.kv.Create(ctx, valueKey(session, id), value); err != nil {
				return err
			}
			next[key] = ref{N: len(value), ID: id}
		}
		if rev == 0 {
			_, err = v.kv.Create(ctx, indexKey(session), mustJSON(next))
		} else {
			_, err = v.kv.Update(ctx, indexKey(session), mustJSON(next), rev)
		}
		switch {
		case isConflict(err):
			if id != "" {
				_ = v.kv.Delete(ctx, valueKey(session, id))
			}
			continue // another write to the session: judge it again
		case err != nil:
			return err
		}
		if had {
			_ = v.kv.Delete(ctx, valueKey(session, old.ID))
		}
		return nil
	}
}

func (v *kvValues) Keys(ctx context.Context, session string) ([]string, error) {
	x, _, err := v.index(ctx, session)
	if err != nil {
		return nil, err
	}
	keys := slices.Sorted(maps.Keys(x))
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}

func (v *kvValues) Drop(ctx context.Context, session string) error {
	x, rev, err := v.index(ctx, session)
	if err != nil || rev == 0 {
		return err
	}
	if err := v.kv.Delete(ctx, indexKey(session), jetstream.LastRevision(rev)); err != nil && !isConflict(err) {
		return err
	}
	for _, r := range x {
		_ = v.kv.Delete(ctx, valueKey(session, r.ID))
	}
	return nil
}
