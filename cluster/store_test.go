package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/codemode-go/codemode/store"
	"github.com/codemode-go/codemode/store/storetest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// One server for the store checks; each check gets buckets of its own.
func TestKVStores(t *testing.T) {
	n := openNode(t, Config{})
	var seq atomic.Int64
	bucket := func(t *testing.T) bkv {
		kv, err := n.js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: fmt.Sprintf("T%d", seq.Add(1)), History: 1})
		if err != nil {
			t.Fatal(err)
		}
		return bkv{kv}
	}
	t.Run("runs", func(t *testing.T) {
		storetest.Runs(t, func(t *testing.T) store.Runs { return kvRuns{bucket(t)} })
	})
	t.Run("values", func(t *testing.T) {
		storetest.Values(t, func(t *testing.T, maxKeys, maxBytes, k int) []store.Values {
			name := fmt.Sprintf("T%d", seq.Add(1))
			var vs []store.Values
			for range k {
				// k clients, each on a connection of its own, on one bucket.
				c := openNode(t, Config{URL: n.URL(), Options: []nats.Option{nats.Token(n.Token())}})
				kv, err := c.js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: name, History: 1})
				if err != nil {
					t.Fatal(err)
				}
				vs = append(vs, &kvValues{kv: bkv{kv}, maxKeys: maxKeys, maxBytes: maxBytes})
			}
			return vs
		})
	})
}
