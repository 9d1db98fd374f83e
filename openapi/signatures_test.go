package openapi

import (
	"os"
	"testing"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/tsctest"
)

// TestGitHubSignaturesTypeCheck converts GitHub's REST API description and
// type-checks every tool signature the catalog renders, and reports the
// size of the instructions a model would get at the default budget.
func TestGitHubSignaturesTypeCheck(t *testing.T) {
	tsc := tsctest.Compiler(t)
	_, rt := githubRuntime(t)
	d := declarations(t, rt)
	d.Check(t, tsc)
	ins := rt.Instructions()
	t.Logf("%d tools; Instructions() at the default budget: %d characters, about %d tokens", d.Len(), len(ins), (len([]rune(ins))+3)/4)
}

// TestBodySignaturesTypeCheck type-checks the signatures of tools with
// form, multipart, text and raw bodies: file objects, arrays of them, and
// the text-or-file union of untyped multipart properties.
func TestBodySignaturesTypeCheck(t *testing.T) {
	tsc := tsctest.Compiler(t)
	readme, err := os.ReadFile("testdata/readme-bodies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	petstore, err := os.ReadFile("testdata/petstore-bodies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, spec := range map[string]string{"forms": formSpec, "forms31": formSpec31, "readme": string(readme), "petstore": string(petstore)} {
		t.Run(name, func(t *testing.T) {
			rt := mountable(t, convert(t, spec, Options{}))
			d := declarations(t, rt)
			d.Check(t, tsc)
		})
	}
}

// declarations holds every signature of a runtime's catalog and the
// declarations of the named types they use.
func declarations(t testing.TB, rt *codemode.Runtime) *tsctest.Declarations {
	t.Helper()
	var d tsctest.Declarations
	lookup := func(name string) (string, []string, bool) {
		r := rt.Types(name)
		if len(r.Items) != 1 {
			return "", nil, false
		}
		return r.Items[0].Declaration, r.Items[0].Types, true
	}
	for _, e := range rt.Catalog() {
		if err := d.AddSignature(e.Segments, e.Signature); err != nil {
			t.Fatal(err)
		}
		if err := d.AddTypes(e.Types, lookup); err != nil {
			t.Fatal(err)
		}
	}
	return &d
}
