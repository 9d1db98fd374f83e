package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/codemode-go/codemode/store"
)

func ExampleValues() {
	ctx := context.Background()
	var values store.Values = store.NewMemoryValues(2, 0) // two keys a session

	_ = values.Put(ctx, "session-1", "cursor", json.RawMessage(`{"page":3}`))
	_ = values.Put(ctx, "session-1", "seen", json.RawMessage(`["a","b"]`))
	v, ok, _ := values.Get(ctx, "session-1", "cursor")
	fmt.Println(string(v), ok)

	err := values.Put(ctx, "session-1", "third", json.RawMessage(`1`))
	fmt.Println(errors.Is(err, store.ErrFull))
	_ = values.Put(ctx, "session-1", "seen", nil) // a nil value deletes, making room
	_ = values.Put(ctx, "session-1", "third", json.RawMessage(`1`))
	keys, _ := values.Keys(ctx, "session-1")
	fmt.Println(keys)

	_ = values.Drop(ctx, "session-1") // the session has ended
	keys, _ = values.Keys(ctx, "session-1")
	fmt.Println(keys)
	// Output:
	// {"page":3} true
	// true
	// [cursor third]
	// []
}

// Two stores opened on one directory, as two processes would open it,
// share each session's quota.
func ExampleOpenDirValues() {
	dir, err := os.MkdirTemp("", "values")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	a, err := store.OpenDirValues(dir, 1, 0) // one key a session
	if err != nil {
		log.Fatal(err)
	}
	b, err := store.OpenDirValues(dir, 1, 0)
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	fmt.Println(a.Put(ctx, "session-1", "cursor", json.RawMessage(`3`)))
	err = b.Put(ctx, "session-1", "other", json.RawMessage(`4`))
	fmt.Println(errors.Is(err, store.ErrFull))
	v, _, _ := b.Get(ctx, "session-1", "cursor")
	fmt.Println(string(v))
	// Output:
	// <nil>
	// true
	// 3
}
