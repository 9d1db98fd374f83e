package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A manifest is read back as published, refused under another key, and
// its changes reach a watcher; one too large for a message is stored in
// chunks.
func TestManifest(t *testing.T) {
	n := openNode(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := n.Manifest(ctx, testKey); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("no manifest: %v", err)
	}
	if err := n.PublishManifest(ctx, testKey, []byte(`{"demoTools":true}`)); err != nil {
		t.Fatal(err)
	}
	if b, err := n.Manifest(ctx, testKey); err != nil || string(b) != `{"demoTools":true}` {
		t.Fatalf("%s %v", b, err)
	}
	if _, err := n.Manifest(ctx, []byte("another key, thirty-two bytes lo")); !errors.Is(err, ErrForgedManifest) {
		t.Fatalf("another key: %v", err)
	}
	got := make(chan string, 4)
	if err := n.WatchManifest(ctx, testKey, func(b []byte, err error) {
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(b[:min(len(b), 20)])
	}); err != nil {
		t.Fatal(err)
	}
	big := `{"x":"` + strings.Repeat("a", 20<<20) + `"}`
	if err := n.PublishManifest(ctx, testKey, []byte(big)); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{big[:20], "error: " + ErrForgedManifest.Error()} {
		if i == 1 {
			if err := n.PublishManifest(ctx, []byte("forger's key, thirty-two bytes l"), []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("watched %q, want %q", g, want)
			}
		case <-ctx.Done():
			t.Fatalf("no update (want %q)", want)
		}
	}
}
