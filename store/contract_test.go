package store_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/codemode-go/codemode/store"
	"github.com/codemode-go/codemode/store/storetest"
)

func TestMemoryRuns(t *testing.T) {
	storetest.Runs(t, func(t *testing.T) store.Runs { return &store.MemoryRuns{} })
}

func TestDirRuns(t *testing.T) {
	storetest.Runs(t, func(t *testing.T) store.Runs {
		d, err := store.OpenDirRuns(filepath.Join(t.TempDir(), "runs"))
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

func TestMemoryValues(t *testing.T) {
	storetest.Values(t, func(t *testing.T, maxKeys, maxBytes, n int) []store.Values {
		return slices.Repeat([]store.Values{store.NewMemoryValues(maxKeys, maxBytes)}, n)
	})
}

// DirValues opened n times on one directory race as processes do.
func TestDirValues(t *testing.T) {
	storetest.Values(t, func(t *testing.T, maxKeys, maxBytes, n int) []store.Values {
		dir := filepath.Join(t.TempDir(), "values")
		var vs []store.Values
		for range n {
			d, err := store.OpenDirValues(dir, maxKeys, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			vs = append(vs, d)
		}
		return vs
	})
}
