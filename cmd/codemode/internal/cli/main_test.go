package cli

import (
	"fmt"
	"os"
	"testing"

	"github.com/codemode-go/codemode/internal/secret"
)

// TestMain keeps the tests, and the processes they start, out of the
// user's configuration directory: the state key, run records and the key
// that signs compiled engine code go to a directory of their own.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "codemode-config-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv(secret.EnvConfigDir, dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
