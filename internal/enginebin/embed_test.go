//go:build codemode_embed

package enginebin

import (
	"context"
	"testing"
)

// TestEmbedded checks what the tagged build carries: the file make wasm
// copied, verified, and first in line after the host's bytes.
func TestEmbedded(t *testing.T) {
	if got := Sum(embedded); got != SHA256 {
		t.Fatalf("embedded quickjs.wasm SHA-256 %s, want %s", got, SHA256)
	}
	if _, src, err := Resolve(context.Background(), nil); err != nil || src.Kind != Embedded {
		t.Errorf("Resolve: got %v, %v; want the embedded copy", src, err)
	}
}
