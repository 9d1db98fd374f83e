package cluster

import (
	"bytes"
	"context"
	"errors"
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
type bkv struct{ jetstream.KeyValue }

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

func (b bkv) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	var e jetstream.KeyValueEntry
	err := retry(ctx, func(c context.Context) (err error) {
		e, err = b.KeyValue.Get(c, key)
		return err
	})
	return e, err
}

// landed reports whether key holds val (a write whose answer was lost
// landed), and its revision.
func (b bkv) landed(ctx context.Context, key string, val []byte) (uint64, bool) {
	e, err := b.Get(ctx, key)
	if err != nil || !bytes.Equal(e.Value(), val) {
		return 0, false
	}
	return e.Revision(), true
}

func (b bkv) Create(ctx context.Context, key string, val []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
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
