//go:build codemode_nonats

package cluster

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestNoEmbeddedServer: a build without the embedded server says so, and
// what to do, when it is asked to start one; it makes no directory.
func TestNoEmbeddedServer(t *testing.T) {
	if EmbeddedServer {
		t.Fatal("EmbeddedServer is true in a codemode_nonats build")
	}
	dir := t.TempDir() + "/data"
	_, err := Open(context.Background(), Config{DataDir: dir})
	if !errors.Is(err, errNoEmbedded) || !strings.Contains(err.Error(), "--nats URL") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data directory was made: %v", err)
	}
}
