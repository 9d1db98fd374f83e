package quickjs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

var (
	testCacheKey  = bytes.Repeat([]byte("k"), 32)
	otherCacheKey = bytes.Repeat([]byte("o"), 32)
)

// warmCache returns a cache directory holding the engine compiled and
// signed under testCacheKey, and the path of its one entry. The first
// call compiles; later ones copy that directory.
func warmCache(t testing.TB) (dir, entry string) {
	t.Helper()
	if warm == "" {
		d, err := os.MkdirTemp("", "codemode-warm-cache-")
		if err != nil {
			t.Fatal(err)
		}
		warm = d
		e, err := NewEngine(context.Background(), Config{Wasm: testWasm(t), CacheDir: warm, CacheKey: testCacheKey})
		if err != nil {
			t.Fatal(err)
		}
		_ = e.Close(context.Background())
	}
	dir = t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(warm)); err != nil {
		t.Fatal(err)
	}
	// CopyFS makes files with the umask's modes; give back wazero's.
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o600)
		if d.IsDir() {
			mode = 0o700
		}
		return os.Chmod(path, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := CheckCache(dir, testCacheKey)
	if err != nil || len(entries) != 1 || entries[0].Err != nil {
		t.Fatalf("warm cache: got %+v, %v; want one signed entry", entries, err)
	}
	return dir, entries[0].Path
}

// warm is the directory warmCache compiled into, and shared the one
// sharedCacheDir returns; TestMain removes both.
var warm, shared string

// sharedCacheDir returns the compilation cache newTestEngine gives engines
// that have none (no test here runs in parallel with another).
func sharedCacheDir(t testing.TB) string {
	t.Helper()
	if shared == "" {
		d, err := os.MkdirTemp("", "codemode-shared-cache-")
		if err != nil {
			t.Fatal(err)
		}
		shared = d
	}
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{warm, shared} {
		if d != "" {
			_ = os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

func TestCacheSigned(t *testing.T) {
	dir := t.TempDir()
	newTestEngine(t, Config{CacheDir: dir, CacheKey: testCacheKey})
	sub, err := cacheSubdir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// wazero made the directory cacheSubdir names, and nothing else.
	names, err := readDirNames(dir)
	if err != nil || len(names) != 1 || names[0] != filepath.Base(sub) {
		t.Fatalf("cache directory holds %q (%v), want only %q", names, err, filepath.Base(sub))
	}
	entries, err := CheckCache(dir, testCacheKey)
	if err != nil || len(entries) != 1 || entries[0].Err != nil {
		t.Fatalf("got %+v, %v; want one signed entry", entries, err)
	}
	if entries, _ := CheckCache(dir, otherCacheKey); len(entries) != 1 || !errors.Is(entries[0].Err, ErrCacheMismatch) {
		t.Errorf("under another key: got %+v, want ErrCacheMismatch", entries)
	}
	if entries, err := CheckCache(filepath.Join(dir, "absent"), testCacheKey); err != nil || len(entries) != 0 {
		t.Errorf("absent directory: got %+v, %v; want no entries", entries, err)
	}
}

// TestPoisonedCache changes a signed entry as someone without the key
// could, and checks that the next engine does not load it: it removes the
// entry, compiles afresh, signs what it wrote, and runs programs.
func TestPoisonedCache(t *testing.T) {
	for _, tc := range []struct {
		name   string
		poison func(t *testing.T, entry string)
		bytes  bool // poison changes the entry's bytes
	}{
		{"bytes in the middle overwritten", func(t *testing.T, entry string) {
			b := read(t, entry)
			copy(b[len(b)/2:], bytes.Repeat([]byte{0xcc}, 4096))
			write(t, entry, b)
		}, true},
		{"whole file rewritten, same length", func(t *testing.T, entry string) {
			b := read(t, entry)
			for i := range b {
				b[i] = byte(i * 7)
			}
			write(t, entry, b)
		}, true},
		// The attack as reported: machine code turned into int3 and the
		// CRC that wazero checks fixed. Loaded, it kills the process.
		{"code replaced by int3, CRC fixed", func(t *testing.T, entry string) {
			write(t, entry, int3Code(t, read(t, entry)))
		}, true},
		{"sidecar deleted", func(t *testing.T, entry string) {
			if err := os.Remove(entry + macSuffix); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"signed with another key", func(t *testing.T, entry string) {
			mac, err := entryMAC(entry, otherCacheKey)
			if err != nil {
				t.Fatal(err)
			}
			write(t, entry+macSuffix, []byte(hex.EncodeToString(mac)+"\n"))
		}, false},
		{"sidecar garbled", func(t *testing.T, entry string) { write(t, entry+macSuffix, []byte("not a mac\n")) }, false},
		// A link to a signed copy: the MAC holds, but wazero would follow
		// the link to wherever it points.
		{"symlink to a signed copy", func(t *testing.T, entry string) {
			elsewhere := filepath.Join(t.TempDir(), "copy")
			write(t, elsewhere, read(t, entry))
			if err := os.Remove(entry); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, entry); err != nil {
				t.Skipf("cannot make a symlink here: %v", err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, entry := warmCache(t)
			tc.poison(t, entry)
			// A date no rewrite gives the entry marks the poisoned one (its
			// inode may be reused by the file that replaces it).
			mark := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			if err := os.Chtimes(entry, mark, mark); err != nil {
				t.Fatal(err)
			}
			poisoned, _ := os.ReadFile(entry)
			if entries, _ := CheckCache(dir, testCacheKey); len(entries) != 1 || entries[0].Err == nil {
				t.Fatalf("CheckCache of the poisoned cache: got %+v, want the entry reported", entries)
			}
			e := newTestEngine(t, Config{CacheDir: dir, CacheKey: testCacheKey})
			in := newTestInstance(t, e, InstanceConfig{})
			if got, err := evalString(t, in, `[1, 2, 3].map(x => x * 7).join()`); got != "7,14,21" {
				t.Errorf("got %q, %v; want 7,14,21", got, err)
			}
			after, err := os.Lstat(entry)
			if err != nil {
				t.Fatal(err)
			}
			if !after.Mode().IsRegular() || after.ModTime().Equal(mark) {
				t.Errorf("the poisoned entry is still there (%s, %s): it was not replaced", after.Mode(), after.ModTime())
			}
			if b, _ := os.ReadFile(entry); tc.bytes && bytes.Equal(b, poisoned) {
				t.Error("the entry still holds the poisoned bytes")
			}
			if entries, err := CheckCache(dir, testCacheKey); err != nil || len(entries) != 1 || entries[0].Err != nil {
				t.Errorf("after: got %+v, %v; want one signed entry", entries, err)
			}
		})
	}
}

// TestOrphanSidecarRemoved: a MAC left without its entry must not vouch
// for the entry wazero writes next.
func TestOrphanSidecarRemoved(t *testing.T) {
	dir, entry := warmCache(t)
	orphan := filepath.Join(filepath.Dir(entry), strings.Repeat("0", 2*sha256.Size)+macSuffix)
	write(t, orphan, read(t, entry+macSuffix))
	newTestEngine(t, Config{CacheDir: dir, CacheKey: testCacheKey})
	if _, err := os.Lstat(orphan); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("orphan sidecar: %v, want it removed", err)
	}
}

func TestUnsafeCacheRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows keeps who may write a file in its ACL, not its mode bits; the MACs still apply")
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir, entry string) string // returns the path the error must name
	}{
		{"cache directory writable by others", func(t *testing.T, dir, _ string) string { return chmod(t, dir, 0o777) }},
		{"cache directory writable by group", func(t *testing.T, dir, _ string) string { return chmod(t, dir, 0o770) }},
		{"wazero's directory writable by others", func(t *testing.T, _, entry string) string {
			return chmod(t, filepath.Dir(entry), 0o703)
		}},
		{"entry writable by group", func(t *testing.T, _, entry string) string { return chmod(t, entry, 0o620) }},
		{"entry of another user", func(t *testing.T, _, entry string) string {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a file to another user")
			}
			if err := os.Chown(entry, 1, 1); err != nil {
				t.Fatal(err)
			}
			return entry
		}},
		{"cache directory of another user", func(t *testing.T, dir, _ string) string {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a file to another user")
			}
			if err := os.Chown(dir, 1, 1); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, entry := warmCache(t)
			want := tc.setup(t, dir, entry)
			_, err := NewEngine(context.Background(), Config{Wasm: testWasm(t), CacheDir: dir, CacheKey: testCacheKey})
			if !errors.Is(err, ErrUnsafeCache) {
				t.Fatalf("got %v, want ErrUnsafeCache", err)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
			entries, cerr := CheckCache(dir, testCacheKey)
			if cerr == nil && len(entries) == 1 {
				cerr = entries[0].Err // the entry's own problem
			}
			if !errors.Is(cerr, ErrUnsafeCache) {
				t.Errorf("CheckCache: got %v, want ErrUnsafeCache", cerr)
			}
			if _, err := os.Lstat(entry); err != nil {
				t.Errorf("the entry of a refused cache was touched: %v", err)
			}
		})
	}
}

func TestCacheNeedsKey(t *testing.T) {
	for _, key := range [][]byte{nil, make([]byte, 31)} {
		if _, err := NewEngine(context.Background(), Config{Wasm: testWasm(t), CacheDir: t.TempDir(), CacheKey: key}); err == nil {
			t.Errorf("a CacheKey of %d bytes was accepted", len(key))
		}
	}
}

// int3Code returns a wazero cache entry b with its machine code replaced
// by int3 and its CRC recomputed (the layout of wazero v1.12's
// serializeCompiledModule): magic, version, function count, offsets, code
// length, code, CRC-32C of the code.
func int3Code(t *testing.T, b []byte) []byte {
	t.Helper()
	b = bytes.Clone(b)
	at := 6 + 1 + int(b[6])
	funcs := int(binary.LittleEndian.Uint32(b[at:]))
	at += 4 + 8*funcs
	n := int(binary.LittleEndian.Uint64(b[at:]))
	at += 8
	if at+n+4 > len(b) {
		t.Fatalf("entry does not have wazero v1.12's layout")
	}
	code := b[at : at+n]
	for i := range code {
		code[i] = 0xcc
	}
	binary.LittleEndian.PutUint32(b[at+n:], crc32.Checksum(code, crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func chmod(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// write replaces path's contents in place, as an attacker with write
// access to the file (not the directory) would.
func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCacheCheck is what a CacheDir adds to every NewEngine that
// finds the engine compiled: checking the directories and the entry's MAC
// (see RATIONALE.md, "Why is the compiled cache signed?").
func BenchmarkCacheCheck(b *testing.B) {
	dir, _ := warmCache(b)
	sub, err := cacheSubdir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := purgeCache(dir, sub, testCacheKey); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewEngineWarmCache is NewEngine with the engine compiled in
// CacheDir, the check included: the start a new process pays.
func BenchmarkNewEngineWarmCache(b *testing.B) {
	dir, _ := warmCache(b)
	wasm := testWasm(b)
	for b.Loop() {
		e, err := NewEngine(context.Background(), Config{Wasm: wasm, CacheDir: dir, CacheKey: testCacheKey})
		if err != nil {
			b.Fatal(err)
		}
		_ = e.Close(context.Background())
	}
}
