package openapi

import (
	"testing"

	"github.com/codemode-go/codemode/internal/tsctest"
)

// TestGitHubSignaturesTypeCheck converts GitHub's REST API description and
// type-checks every tool signature the catalog renders, and reports the
// size of the instructions a model would get at the default budget.
func TestGitHubSignaturesTypeCheck(t *testing.T) {
	tsc := tsctest.Compiler(t)
	_, rt := githubRuntime(t)
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
