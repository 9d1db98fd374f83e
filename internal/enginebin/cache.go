package enginebin

import (
	"os"
	"path/filepath"
)

// EnvCacheDir replaces codemode's per-user cache directory
// (os.UserCacheDir()/codemode), for tests and for hosts whose home
// directory is not writable.
const EnvCacheDir = "CODEMODE_CACHE_DIR"

// CacheRoot returns codemode's per-user cache directory: $CODEMODE_CACHE_DIR
// when set, else os.UserCacheDir()/codemode. The command keeps compiled
// engine code under it; the engine binary itself is never read from it.
func CacheRoot() (string, error) {
	if d := os.Getenv(EnvCacheDir); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "codemode"), nil
}
