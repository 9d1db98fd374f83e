package quickjs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// wazero checks a cached entry with a CRC only, then maps its bytes as
// executable code: whoever can write an entry can make the engine run
// their machine code. So before wazero may load anything from
// Config.CacheDir, NewEngine refuses directories other users can write and
// removes every entry whose MAC under Config.CacheKey is missing or wrong
// (wazero then compiles it afresh), and after compiling it signs the
// entries wazero wrote. The MAC is in a sidecar file beside the entry,
// KEY.hmac: wazero opens only the file named by its key, so the sidecar is
// invisible to it.

// ErrUnsafeCache is wrapped by the error [NewEngine] and [CheckCache]
// return when a cache directory, wazero's directory in it, or an entry
// there belongs to another user or can be written by group or others
// (Unix): anyone who can write there can plant code the engine would run.
// The message names the path and the fix.
var ErrUnsafeCache = errors.New("quickjs: unsafe compilation cache")

// ErrCacheUnsigned is wrapped by a [CacheEntry]'s error when the entry
// has no MAC: it was written by a codemode from before entries were
// signed, or by something else. NewEngine removes it and compiles afresh.
var ErrCacheUnsigned = errors.New("compiled code is not signed")

// ErrCacheMismatch is wrapped by a [CacheEntry]'s error when the entry
// does not match its MAC (it changed after it was signed, or another key
// signed it) or is not a regular file. NewEngine removes it and compiles
// afresh.
var ErrCacheMismatch = errors.New("compiled code does not match its MAC")

// CacheEntry is one file of compiled code in a cache directory.
type CacheEntry struct {
	// Path is the entry's file.
	Path string
	// Err is nil when the entry's MAC is valid, else an error wrapping
	// ErrCacheUnsigned, ErrCacheMismatch or ErrUnsafeCache, or the error
	// reading it.
	Err error
}

// macSuffix names an entry's sidecar: the entry's name plus macSuffix.
const macSuffix = ".hmac"

// macDomain starts every MAC's input, so no other use of a key can
// produce a valid one.
const macDomain = "codemode compiled cache v1\x00"

// CheckCache reports every entry of compiled code in the cache directory
// dir as NewEngine with CacheDir dir and CacheKey key would find it,
// changing nothing. Its error, wrapping [ErrUnsafeCache], is about dir or
// wazero's directory in it; an entry's problem is in its CacheEntry. A
// directory that does not exist has no entries.
func CheckCache(dir string, key []byte) ([]CacheEntry, error) {
	sub, err := cacheSubdir(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, sub} {
		switch err := checkCacheDir(d); {
		case errors.Is(err, fs.ErrNotExist):
			return nil, nil
		case err != nil:
			return nil, err
		}
	}
	names, err := readDirNames(sub)
	if err != nil {
		return nil, fmt.Errorf("quickjs: compilation cache: %w", err)
	}
	var entries []CacheEntry
	for _, name := range names {
		if isEntryName(name) {
			path := filepath.Join(sub, name)
			entries = append(entries, CacheEntry{Path: path, Err: checkEntry(path, key)})
		}
	}
	return entries, nil
}

// cacheSubdir is the directory in dir that wazero keeps its entries in,
// as wazero.NewCompilationCacheWithDir names it: by wazero's version (as
// the build records it), architecture and OS.
func cacheSubdir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("quickjs: compilation cache: %w", err)
	}
	return filepath.Join(abs, "wazero-"+wazeroVersion()+"-"+runtime.GOARCH+"-"+runtime.GOOS), nil
}

// wazeroVersion is wazero's own notion of its version
// (internal/version.GetWazeroVersion, which it does not export): the
// version of the last dependency whose path contains its module path, or
// "dev". NewEngine checks that wazero made the directory this implies, so
// a disagreement fails rather than leaves wazero's real entries unchecked.
var wazeroVersion = sync.OnceValue(func() string {
	v := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if strings.Contains(dep.Path, "github.com/tetratelabs/wazero") {
				v = dep.Version
			}
		}
		if v == "" || v == "(devel)" {
			v = info.Main.Version
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
})

// isEntryName reports whether wazero could open name as an entry: it
// names entries by the hex of a SHA-256.
func isEntryName(name string) bool {
	if len(name) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(name) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkEntry returns nil when path's sidecar holds its MAC.
func checkEntry(path string, key []byte) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", ErrCacheMismatch, path)
	}
	if err := checkCacheFile(path, fi); err != nil {
		return err
	}
	want, err := readMAC(path + macSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s has no %s", ErrCacheUnsigned, path, macSuffix)
	}
	if err != nil {
		return err
	}
	got, err := entryMAC(path, key)
	if err != nil {
		return err
	}
	if !hmac.Equal(got, want) {
		return fmt.Errorf("%w: %s", ErrCacheMismatch, path)
	}
	return nil
}

// readMAC returns the MAC a sidecar holds, or an error wrapping
// ErrCacheMismatch when it holds none.
func readMAC(sidecar string) ([]byte, error) {
	fi, err := os.Lstat(sidecar)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() != 2*sha256.Size+1 {
		return nil, fmt.Errorf("%w: %s is not a MAC", ErrCacheMismatch, sidecar)
	}
	b, err := os.ReadFile(sidecar)
	if err != nil {
		return nil, err
	}
	mac, err := hex.DecodeString(strings.TrimSuffix(string(b), "\n"))
	if err != nil || len(mac) != sha256.Size {
		return nil, fmt.Errorf("%w: %s is not a MAC", ErrCacheMismatch, sidecar)
	}
	return mac, nil
}

// entryMAC is HMAC-SHA256 under key of macDomain, the entry's name (so
// one signed entry cannot stand in for another) and its bytes.
func entryMAC(path string, key []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := hmac.New(sha256.New, key)
	m.Write([]byte(macDomain + filepath.Base(path) + "\x00"))
	if _, err := io.Copy(m, f); err != nil {
		return nil, err
	}
	return m.Sum(nil), nil
}

// purgeCache readies the cache directory dir for wazero, which has made
// its directory sub there: it refuses unsafe directories and entries, and
// removes every entry without a valid MAC, and every sidecar without an
// entry (a sidecar must never vouch for an entry written after it).
func purgeCache(dir, sub string, key []byte) error {
	if _, err := os.Stat(sub); err != nil {
		return fmt.Errorf("quickjs: compilation cache: wazero did not make %s, where its entries are expected: %w", sub, err)
	}
	entries, err := CheckCache(dir, key)
	if err != nil {
		return err
	}
	for _, e := range entries {
		switch {
		case e.Err == nil:
			continue
		case errors.Is(e.Err, ErrUnsafeCache):
			return e.Err
		}
		for _, p := range []string{e.Path, e.Path + macSuffix} {
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("quickjs: compilation cache: cannot remove %s, which failed its check (%v): %w; remove it by hand, or use another cache directory", p, e.Err, err)
			}
		}
	}
	names, err := readDirNames(sub)
	if err != nil {
		return fmt.Errorf("quickjs: compilation cache: %w", err)
	}
	for _, name := range names {
		entry, ok := strings.CutSuffix(name, macSuffix)
		if !ok || !isEntryName(entry) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(sub, entry)); errors.Is(err, fs.ErrNotExist) {
			if err := os.RemoveAll(filepath.Join(sub, name)); err != nil {
				return fmt.Errorf("quickjs: compilation cache: cannot remove %s: %w; remove it by hand, or use another cache directory", filepath.Join(sub, name), err)
			}
		}
	}
	return nil
}

// signCache writes a sidecar for every entry in sub that has none: after
// purgeCache, those are the entries wazero just wrote (or another process
// of this user wrote meanwhile, which it could sign as well).
func signCache(sub string, key []byte) error {
	names, err := readDirNames(sub)
	if err != nil {
		return fmt.Errorf("quickjs: compilation cache: %w", err)
	}
	for _, name := range names {
		path := filepath.Join(sub, name)
		if !isEntryName(name) {
			continue
		}
		if _, err := os.Lstat(path + macSuffix); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		mac, err := entryMAC(path, key)
		if err == nil {
			err = writeFile(path+macSuffix, []byte(hex.EncodeToString(mac)+"\n"))
		}
		if err != nil {
			return fmt.Errorf("quickjs: compilation cache: sign %s: %w", path, err)
		}
	}
	return nil
}

// writeFile writes name whole or not at all (as wazero writes entries):
// a reader never finds half a MAC.
func writeFile(name string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), filepath.Base(name)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	return err
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// checkCacheDir refuses a cache directory that is not a directory, or
// that checkCacheFile refuses.
func checkCacheDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory: use another cache directory", ErrUnsafeCache, dir)
	}
	return checkCacheFile(dir, fi)
}
