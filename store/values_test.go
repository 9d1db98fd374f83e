package store

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// jsonOfLen returns a JSON string n bytes long (n >= 2).
func jsonOfLen(n int, fill byte) string {
	return `"` + strings.Repeat(string(fill), n-2) + `"`
}

func mustPut(t *testing.T, v Values, session, key, value string) {
	t.Helper()
	if err := v.Put(context.Background(), session, key, json.RawMessage(value)); err != nil {
		t.Fatalf("put %q %q: %v", session, key, err)
	}
}

func wantGet(t *testing.T, v Values, session, key, want string) {
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

func wantKeys(t *testing.T, v Values, session string, want ...string) {
	t.Helper()
	got, err := v.Keys(context.Background(), session)
	if err != nil {
		t.Fatalf("keys %q: %v", session, err)
	}
	if got == nil || !slices.Equal(got, append([]string{}, want...)) {
		t.Fatalf("keys %q: got %#v, want %q", session, got, want)
	}
}

func TestMemoryValuesSessions(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryValues(0, 0)
	steps := []struct {
		do   func() error
		want int
	}{
		{func() error { return m.Put(ctx, "s", "k", nil) }, 0},
		{func() error { return m.Put(ctx, "s", "k", json.RawMessage(`1`)) }, 1},
		{func() error { return m.Put(ctx, "t", "k", json.RawMessage(jsonOfLen(MaxValueBytes+1, 'a'))) }, 1},
		{func() error { return m.Put(ctx, "s", "k", nil) }, 0},
		{func() error { return m.Put(ctx, "s", "k", json.RawMessage(`1`)) }, 1},
		{func() error { return m.Drop(ctx, "s") }, 0},
	}
	for i, st := range steps {
		_ = st.do()
		if got := m.Sessions(); got != st.want {
			t.Fatalf("step %d: got %d sessions, want %d", i, got, st.want)
		}
	}
}
