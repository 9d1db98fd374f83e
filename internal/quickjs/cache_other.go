//go:build !unix

package quickjs

import (
	"fmt"
	"io/fs"
	"os"
)

// checkCacheDir requires only a directory. On Windows, who may write a
// file is in its ACL, not in the permission bits Go reports, and the
// per-user cache directory (%LocalAppData%) is its user's alone; the MACs
// still catch entries changed by anyone without the key.
func checkCacheDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory: use another cache directory", ErrUnsafeCache, dir)
	}
	return nil
}

// checkCacheFile accepts any owner and mode, for checkCacheDir's reason.
func checkCacheFile(string, fs.FileInfo) error { return nil }
