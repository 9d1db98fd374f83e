package openapi_test

import (
	"os"
	"testing"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/tsctest"
	"github.com/codemode-go/codemode/openapi"
)

// TestGitHubSignaturesTypeCheck converts GitHub's REST API description and
// type-checks every tool signature the catalog renders, and reports the
// size of the instructions a model would get at the default budget.
func TestGitHubSignaturesTypeCheck(t *testing.T) {
	tsc := tsctest.Compiler(t)
	spec, err := os.ReadFile("../testdata/large/api.github.com.json")
	if err != nil {
		t.Skip("the GitHub description is not present (make specs fetches it)")
	}
	api, err := openapi.FromSpec(spec, openapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := codemode.New(codemode.Options{Tools: codemode.Tools{api.Namespace: api.Tools}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var d tsctest.Declarations
	for _, e := range rt.Catalog() {
		if err := d.AddSignature(e.Segments, e.Signature); err != nil {
			t.Fatal(err)
		}
	}
	d.Check(t, tsc)
	ins := rt.Instructions()
	t.Logf("%d tools; Instructions() at the default budget: %d characters, about %d tokens", d.Len(), len(ins), (len([]rune(ins))+3)/4)
}
