package cli

import (
	"os"
	"testing"

	"github.com/codemode-go/codemode/internal/secret"
)

// TestMain keeps the key that signs compiled engine code (made by every
// command given --cache-dir) out of the real per-user configuration
// directory.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "codemode-cli-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv(secret.EnvConfigDir, dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
