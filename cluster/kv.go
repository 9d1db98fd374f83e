package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// opTimeout bounds one request to the servers. A request whose answer is
// lost (its server died, a leader changed) would otherwise wait for the
// caller's whole context, which for a worker has no deadline.
const opTimeout = 5 * time.Second

// bkv is a KV bucket whose requests are bounded and retried when their
// answer was lost: a write whose answer never came may have landed, so
// before writing again it reads the key, and a key that holds exactly
// the bytes written is the write's success. Reads are retried alike.
//
// Every value is stored after a tag of random bytes, new for each write
// (and the same for its retries): two writers that write the same value
// — two fronts handing out the same cell lines, two people giving the
// same answer — still write different bytes, so the loser of a
// compare-and-swap never takes the winner's write for its own. Get
// returns the value without its tag; write and read the buckets only
// through bkv.
type bkv struct{ jetstream.KeyValue }

// tagLen is the length of a value's write tag.
const tagLen = 12

func tagged(val []byte) []byte {
	v := make([]byte, tagLen+len(val))
	_, _ = rand.Read(v[:tagLen])
	copy(v[tagLen:], val)
	return v
}

// untagged is an entry whose Value is without its write tag.
type untagged struct{ jetstream.KeyValueEntry }

func (u untagged) Value() []byte {
	v := u.KeyValueEntry.Value()
	if len(v) < tagLen {
		return nil
	}
	return v[tagLen:]
}

// lost reports an error after which a request may be tried again: its
// answer did not come, or the servers were between leaders.
func lost(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var api *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.As(err, &api) && api.Code == 503
}

// retry runs op with bounded attempts until it succeeds, fails for good,
// or ctx ends; backoff grows to a second.
func retry(ctx context.Context, op func(context.Context) error) error {
	wait := 50 * time.Millisecond
	for {
		c, cancel := context.WithTimeout(ctx, opTimeout)
		err := op(c)
		cancel()
		if err == nil || !lost(ctx, err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Get reads key; the entry's Value is without its write tag.
func (b bkv) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	e, err := b.raw(ctx, key)
	if err != nil {
		return nil, err
	}
	return untagged{e}, nil
}

func (b bkv) raw(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	var e jetstream.KeyValueEntry
	err := retry(ctx, func(c context.Context) (err error) {
		e, err = b.KeyValue.Get(c, key)
		return err
	})
	return e, err
}

// getJSON reads key's JSON value into a T, with its revision.
func getJSON[T any](ctx context.Context, b bkv, key string) (T, uint64, error) {
	var v T
	e, err := b.Get(ctx, key)
	if err != nil {
		return v, 0, err
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return v, 0, fmt.Errorf("cluster: the value of %s: %w", key, err)
	}
	return v, e.Revision(), nil
}

// landed reports whether key holds the tagged bytes val (a write whose
// answer was lost landed), and its revision.
func (b bkv) landed(ctx context.Context, key string, val []byte) (uint64, bool) {
	e, err := b.raw(ctx, key)
	if err != nil || !bytes.Equal(e.Value(), val) {
		return 0, false
	}
	return e.Revision(), true
}

func (b bkv) Create(ctx context.Context, key string, val []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	val = tagged(val)
	var rev uint64
	tried := false
	err := retry(ctx, func(c context.Context) (err error) {
		rev, err = b.KeyValue.Create(c, key, val, opts...)
		if errors.Is(err, jetstream.ErrKeyExists) && tried {
			if r, ok := b.landed(ctx, key, val); ok {
				rev, err = r, nil
			}
		}
		tried = true
		return err
	})
	return rev, err
}

func (b bkv) Update(ctx context.Context, key string, val []byte, last uint64) (uint64, error) {
	val = tagged(val)
	var rev uint64
	tried := false
	err := retry(ctx, func(c context.Context) (err error) {
		rev, err = b.KeyValue.Update(c, key, val, last)
		if isConflict(err) && tried {
			if r, ok := b.landed(ctx, key, val); ok {
				rev, err = r, nil
			}
		}
		tried = true
		return err
	})
	return rev, err
}

func (b bkv) Put(ctx context.Context, key string, val []byte) (uint64, error) {
	val = tagged(val)
	var rev uint64
	err := retry(ctx, func(c context.Context) (err error) {
		rev, err = b.KeyValue.Put(c, key, val)
		return err
	})
	return rev, err
}

func (b bkv) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	tried := false
	return retry(ctx, func(c context.Context) error {
		err := b.KeyValue.Delete(c, key, opts...)
		if isConflict(err) && tried {
			if _, gerr := b.Get(ctx, key); errors.Is(gerr, jetstream.ErrKeyNotFound) {
				return nil // the first attempt landed
			}
		}
		tried = true
		return err
	})
}

// publish publishes a job, retried while its answer is lost: the
// stream drops a repeat by its message id.
func (n *Node) publish(ctx context.Context, m *nats.Msg) error {
	return retry(ctx, func(c context.Context) error {
		_, err := n.js.PublishMsg(c, m)
		return err
	})
}
