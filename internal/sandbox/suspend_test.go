package sandbox

import (
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// imageDigest is the digest of the image of a configuration with one
// namespace.
func imageDigest(t *testing.T, s *Sandbox) string {
	t.Helper()
	p := s.pool(poolKey{DefaultMemoryBytes, bindingSpec([]Namespace{{Name: "tools", ErrorClass: &ErrorClass{Name: "ToolError", Member: "tool"}}})})
	if err := p.capture(s); err != nil {
		t.Fatal(err)
	}
	img, _ := p.image()
	d := img.Digest()
	return hex.EncodeToString(d[:])
}

// TestImageSameInEveryProcess boots a configuration's image in this
// process and in a child process: a suspended run resumes only against
// the same bytes. (Anything allocated in a random order while booting,
// such as a walk over a Go map, makes them differ.)
func TestImageSameInEveryProcess(t *testing.T) {
	if os.Getenv("CODEMODE_IMAGE_CHILD") == "1" {
		s := newSandbox(t)
		os.Stdout.WriteString("digest=" + imageDigest(t, s) + "\n")
		return
	}
	s := newSandbox(t)
	here := imageDigest(t, s)
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestImageSameInEveryProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CODEMODE_IMAGE_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		_, after, ok := strings.Cut(string(out), "digest=")
		if !ok {
			t.Fatalf("child printed no digest:\n%s", out)
		}
		if there := strings.Fields(after)[0]; there != here {
			t.Fatalf("image digest %s in a child process, %s here", there, here)
		}
	}
}

func newSandbox(t *testing.T) *Sandbox {
	t.Helper()
	s, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
