package cluster

import (
	"context"
	"testing"
	"time"
)

// Two writes of the same value are different bytes in the bucket, so a
// write retried after its answer was lost recognizes only itself as
// landed, never another writer's identical value; reads see the value
// without its tag.
func TestWriteTags(t *testing.T) {
	n := openNode(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rev, err := n.runs.Create(ctx, "t.x", []byte(`{"seq":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.runs.Update(ctx, "t.x", []byte(`{"seq":2}`), rev); err != nil {
		t.Fatal(err)
	}
	raw, err := n.runs.raw(ctx, "t.x")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.runs.landed(ctx, "t.x", raw.Value()); !ok {
		t.Fatal("the write itself was not recognized")
	}
	if _, ok := n.runs.landed(ctx, "t.x", tagged([]byte(`{"seq":2}`))); ok {
		t.Fatal("another write of the same value was taken for this one")
	}
	if _, err := n.runs.Update(ctx, "t.x", []byte(`{"seq":2}`), rev); !isConflict(err) {
		t.Fatalf("a second writer at the old revision: %v", err)
	}
	if c, _, err := getJSON[cursor](ctx, n.runs, "t.x"); err != nil || c.Seq != 2 {
		t.Fatalf("read back %+v %v", c, err)
	}
}
