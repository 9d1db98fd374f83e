package enginebin

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// npmTimeout bounds one npm fetch: a registry that never answers must not
// hang codemode.New. A fetch normally takes a second or two.
const npmTimeout = 3 * time.Minute

// tarballWasm is the engine's path inside the npm tarball.
const tarballWasm = "package/quickjs.wasm"

// FetchNpm runs `npm pack quickjs-wasi@PackageVersion` with the given npm
// executable into a temporary directory and returns the verified engine
// from the tarball (see [FromTarball]). npm brings the user's registry,
// proxy and certificate settings; its cache makes a second fetch local.
func FetchNpm(ctx context.Context, npm string) ([]byte, error) {
	spec := "quickjs-wasi@" + PackageVersion
	dir, err := os.MkdirTemp("", "codemode-engine-")
	if err != nil {
		return nil, fmt.Errorf("npm pack %s: %w", spec, err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "pack", "--pack-destination", dir, "--loglevel=error", spec)
	// Run outside any project, so a package.json or workspace around the
	// caller's working directory plays no part.
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("npm pack %s: %w: %s", spec, err, lastLines(out.String(), 3))
	}
	tgzs, _ := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if len(tgzs) != 1 {
		return nil, fmt.Errorf("npm pack %s: want one tarball in %s, got %d", spec, dir, len(tgzs))
	}
	tgz, err := os.ReadFile(tgzs[0])
	if err != nil {
		return nil, fmt.Errorf("npm pack %s: %w", spec, err)
	}
	return FromTarball(tgz, Source{Kind: Npm})
}

// FromTarball returns the engine from an npm tarball of
// quickjs-wasi@PackageVersion: it checks the tarball against [Integrity]
// before opening it, then the extracted quickjs.wasm against [SHA256].
// Mismatches are *MismatchError values naming src.
func FromTarball(tgz []byte, src Source) ([]byte, error) {
	sum := sha512.Sum512(tgz)
	if got := "sha512-" + base64.StdEncoding.EncodeToString(sum[:]); got != Integrity {
		return nil, &MismatchError{Source: src, Hash: "npm integrity", Got: got, Want: Integrity}
	}
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: the tarball has no %s", src, tarballWasm)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		if h.Name != tarballWasm || h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxWasmBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		if err := Verify(b, src); err != nil {
			return nil, err
		}
		return b, nil
	}
}

// lastLines keeps the end of npm's output, where its error is.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}
