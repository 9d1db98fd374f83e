package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"testing"
)

// envTestCache carries the compilation cache of these tests to the
// processes they start.
const envTestCache = "CODEMODE_SANDBOX_TEST_CACHE"

var testCacheKey = bytes.Repeat([]byte("t"), 32)

// TestMain makes one compilation cache for the engines these tests make
// (see testOptions) and those of the processes they start, removed at
// the end by the process that made it.
func TestMain(m *testing.M) {
	dir, made := os.Getenv(envTestCache), false
	if dir == "" {
		d, err := os.MkdirTemp("", "codemode-sandbox-cache-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		dir, made = d, true
		os.Setenv(envTestCache, dir)
	}
	code := m.Run()
	if made {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// testOptions gives o the shared compilation cache when it has none:
// compiling the engine is the slow step (seconds, ten times that under
// -race), and only the tests of the cache itself need it done afresh.
func testOptions(o Options) Options {
	if o.CacheDir == "" {
		o.CacheDir, o.CacheKey = os.Getenv(envTestCache), testCacheKey
	}
	return o
}
