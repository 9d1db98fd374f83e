package enginebin

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// CacheRoot returns codemode's per-user cache directory: $CODEMODE_CACHE_DIR
// when set, else os.UserCacheDir()/codemode.
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

// CachePath is where the engine lives under a cache root:
// ROOT/engine/SHA256/quickjs.wasm. Keying the directory by the hash lets
// builds pinned to different engines share a root without ever reading
// each other's file.
func CachePath(root string) string {
	return filepath.Join(root, "engine", SHA256, "quickjs.wasm")
}

// Install verifies b (naming from in a mismatch) and writes it to
// CachePath(root), returning that path.
//
// Readers see the old file or the whole new one, never part of a write:
// the bytes go to a temporary file in the same directory (so the rename
// stays on one filesystem), are synced, and are renamed over the final
// name. Concurrent installers race harmlessly, since every writer's bytes
// are the same.
func Install(root string, b []byte, from Source) (string, error) {
	if err := Verify(b, from); err != nil {
		return "", err
	}
	path := CachePath(root)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("engine cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".quickjs.wasm.*")
	if err != nil {
		return "", fmt.Errorf("engine cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		// Windows refuses to rename over a file another process has
		// open; if that file is already the engine, the install is done.
		if cur, rerr := readWasm(path); rerr == nil && bytes.Equal(cur, b) {
			return path, nil
		}
		return "", fmt.Errorf("engine cache: %w", err)
	}
	return path, nil
}
