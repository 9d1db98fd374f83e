//go:build unix

package secret

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkFile refuses a key file another user owns or could read or write.
func checkFile(name string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s does not belong to this user (uid %d): chown it, or set $%s to a directory of your own", ErrUnsafe, name, os.Geteuid(), EnvConfigDir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %04o, open to group or others: chmod 600 %s", ErrUnsafe, name, perm, name)
	}
	return nil
}

// checkDir refuses a key file's directory that group or others can write:
// they could replace the key with one they know.
func checkDir(dir, name string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("secret: key %s: %w", name, err)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: %s is in %s, which has mode %04o, writable by group or others: chmod go-w %s, or set $%s to a private directory", ErrUnsafe, name, dir, perm, dir, EnvConfigDir)
	}
	return nil
}
