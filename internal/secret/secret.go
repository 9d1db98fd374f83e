package secret

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// EnvConfigDir replaces codemode's per-user configuration directory
// (os.UserConfigDir()/codemode), for tests and for hosts whose home
// directory is elsewhere.
const EnvConfigDir = "CODEMODE_CONFIG_DIR"

// ErrUnsafe is wrapped by the error [Key] returns when a key file exists
// but cannot be trusted: not a regular file, too short, or (on Unix) not
// owned by the current user, readable or writable by others, or in a
// directory others can write. The message names the file and the fix.
var ErrUnsafe = errors.New("secret: unsafe key file")

// Root returns codemode's per-user configuration directory:
// $CODEMODE_CONFIG_DIR when set, else os.UserConfigDir()/codemode.
func Root() (string, error) {
	if d := os.Getenv(EnvConfigDir); d != "" {
		return d, nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("secret: no per-user configuration directory (%w): set $%s", err, EnvConfigDir)
	}
	return filepath.Join(d, "codemode"), nil
}

// Key reads the secret key in file name, making it when it does not exist:
// 32 random bytes (min, when larger) in a file of mode 0600, its directory
// made 0700. Processes racing to make the key all end with the same one.
//
// Key refuses, with an error wrapping [ErrUnsafe] that names the file and
// says what to fix, a file that is not a regular file (a symlink
// included), one shorter than min bytes, and on Unix a file not owned by
// the current user, with any group or other permission bits, or in a
// directory group or others can write.
func Key(name string, min int) ([]byte, error) {
	b, err := read(name, min)
	if !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secret: key %s: %w", name, err)
	}
	if err := checkDir(dir, name); err != nil {
		return nil, err
	}
	b = make([]byte, max(min, 32))
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("secret: key %s: %w", name, err)
	}
	switch err := create(name, b); {
	case errors.Is(err, fs.ErrExist):
		return read(name, min) // another process made it first: use theirs
	case err != nil:
		return nil, fmt.Errorf("secret: key %s: %w", name, err)
	}
	return b, nil
}

// create writes b to a new file name, failing with fs.ErrExist when name
// exists. The bytes go to a temporary file first and are hard-linked to
// name, so a process that loses the race (and reads name) never sees a
// file still being written, as it could after O_EXCL.
func create(name string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600) // CreateTemp's 0600, whatever the umask did
	}
	if err == nil {
		err = os.Link(tmp.Name(), name)
	}
	return err
}

// read returns the key in name, or an error wrapping fs.ErrNotExist when
// there is none.
func read(name string, min int) ([]byte, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("secret: key %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file (%s): replace it with the key file itself", ErrUnsafe, name, fi.Mode().Type())
	}
	if err := checkFile(name, fi); err != nil {
		return nil, err
	}
	if err := checkDir(filepath.Dir(name), name); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("secret: key %s: %w", name, err)
	}
	if len(b) < min {
		return nil, fmt.Errorf("%w: %s holds %d bytes, fewer than the %d a key needs: remove it, and a new key is made", ErrUnsafe, name, len(b), min)
	}
	return b, nil
}
