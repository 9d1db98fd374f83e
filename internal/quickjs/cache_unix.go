//go:build unix

package quickjs

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkCacheFile refuses what another user owns or group or others can
// write: they could put an entry in the cache, or replace one. Others
// reading it is harmless: compiled code is no secret.
func checkCacheFile(path string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s does not belong to this user (uid %d): chown it, or use a cache directory of your own", ErrUnsafeCache, path, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: %s has mode %04o, writable by group or others: chmod go-w %s, or use a private cache directory", ErrUnsafeCache, path, perm, path)
	}
	return nil
}
