package secret

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

func TestRoot(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvConfigDir, dir)
	if got, err := Root(); err != nil || got != dir {
		t.Errorf("got %q, %v; want %q", got, err, dir)
	}
}

func TestKeyMadeOnceAndKept(t *testing.T) {
	name := filepath.Join(t.TempDir(), "new", "cache.key")
	a, err := Key(name, 32)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 32 {
		t.Errorf("got a key of %d bytes, want 32", len(a))
	}
	b, err := Key(name, 32)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("second Key returned a different key")
	}
	if runtime.GOOS == "windows" {
		return
	}
	for _, tc := range []struct {
		path string
		want os.FileMode
	}{{name, 0o600}, {filepath.Dir(name), 0o700}} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != tc.want {
			t.Errorf("%s: mode %04o, want %04o", tc.path, got, tc.want)
		}
	}
}

// Processes (here goroutines, which race the same way on the file
// system) that all find no key end with the same one.
func TestKeyRace(t *testing.T) {
	name := filepath.Join(t.TempDir(), "cache.key")
	keys := make([][]byte, 8)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = Key(name, 32) })
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("caller %d got a different key", i)
		}
	}
	left, err := filepath.Glob(filepath.Join(filepath.Dir(name), ".*"))
	if err != nil || len(left) != 0 {
		t.Errorf("temporary files left behind: %v %v", left, err)
	}
}

func TestKeyRefused(t *testing.T) {
	good := bytes.Repeat([]byte{7}, 32)
	for _, tc := range []struct {
		name  string
		unix  bool // the check exists on Unix only
		setup func(t *testing.T, name string)
	}{
		{name: "symlink", setup: func(t *testing.T, name string) {
			target := filepath.Join(t.TempDir(), "elsewhere.key")
			write(t, target, good, 0o600)
			if err := os.Symlink(target, name); err != nil {
				t.Skipf("cannot make a symlink here: %v", err)
			}
		}},
		{name: "directory", setup: func(t *testing.T, name string) {
			if err := os.Mkdir(name, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "short", setup: func(t *testing.T, name string) { write(t, name, good[:31], 0o600) }},
		{name: "mode 0644", unix: true, setup: func(t *testing.T, name string) { write(t, name, good, 0o644) }},
		{name: "mode 0640", unix: true, setup: func(t *testing.T, name string) { write(t, name, good, 0o640) }},
		{name: "directory writable by others", unix: true, setup: func(t *testing.T, name string) {
			write(t, name, good, 0o600)
			if err := os.Chmod(filepath.Dir(name), 0o777); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "new key in a directory writable by group", unix: true, setup: func(t *testing.T, name string) {
			if err := os.Chmod(filepath.Dir(name), 0o770); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.unix && runtime.GOOS == "windows" {
				t.Skip("Windows keeps who may read a file in its ACL, not its mode bits")
			}
			name := filepath.Join(t.TempDir(), "cache.key")
			tc.setup(t, name)
			before, _ := os.ReadFile(name)
			k, err := Key(name, 32)
			if !errors.Is(err, ErrUnsafe) {
				t.Fatalf("got %x, %v; want ErrUnsafe", k, err)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(name)) {
				t.Errorf("error %q does not name %s", err, name)
			}
			if after, _ := os.ReadFile(name); !bytes.Equal(before, after) {
				t.Error("Key changed a file it refused")
			}
		})
	}
}

// A file another user owns is refused; only root can make one.
func TestKeyOtherOwner(t *testing.T) {
	if runtime.GOOS == "windows" || os.Geteuid() != 0 {
		t.Skip("needs root on Unix to give a file to another user")
	}
	name := filepath.Join(t.TempDir(), "cache.key")
	write(t, name, bytes.Repeat([]byte{7}, 32), 0o600)
	if err := os.Chown(name, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := Key(name, 32); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("got %v, want ErrUnsafe", err)
	}
}

func write(t *testing.T, name string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(name, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}
