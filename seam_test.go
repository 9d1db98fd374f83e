package codemode

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGuestSeam keeps the language behind internal/guest: the root package
// imports neither the TypeScript front end nor the signature renderer, and
// of the packages it depends on, only the JavaScript implementation of the
// seam (internal/guest/js) does.
func TestGuestSeam(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	const mod = "github.com/codemode-go/codemode"
	languageOnly := []string{mod + "/internal/typescript", mod + "/internal/tsgen"}
	for _, tags := range []string{"", "codemode_embed"} {
		out, err := exec.Command(gobin, "list", "-tags", tags, "-deps", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, imports, _ := strings.Cut(line, ":")
			for _, imp := range strings.Fields(imports) {
				for _, lo := range languageOnly {
					if imp == lo && pkg != mod+"/internal/guest/js" {
						t.Errorf("tags %q: %s imports %s; only internal/guest/js may", tags, pkg, lo)
					}
				}
			}
		}
	}
}
