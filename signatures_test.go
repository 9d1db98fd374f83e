package codemode

import (
	"strings"
	"testing"

	"github.com/codemode-go/codemode/internal/tsctest"
)

// TestConformanceSignaturesTypeCheck renders the signature of every tool
// of the conformance suite, as the catalog, search and the instructions
// show it, and type-checks them.
func TestConformanceSignaturesTypeCheck(t *testing.T) {
	tsc := tsctest.Compiler(t)
	var d tsctest.Declarations
	for _, c := range loadConformance(t) {
		tools := Tools{}
		for _, ct := range c.Tools {
			ns, name, _ := strings.Cut(ct.Path, ".")
			tool := Tool{Description: ct.Description, Run: nop, SkipInputValidation: true}
			if len(ct.InputSchema) > 0 && string(ct.InputSchema) != "null" {
				tool.Input = schema(t, string(ct.InputSchema))
			}
			if len(ct.OutputSchema) > 0 && string(ct.OutputSchema) != "null" {
				tool.Output = schema(t, string(ct.OutputSchema))
			}
			sub, _ := tools[ns].(Tools)
			if sub == nil {
				sub = Tools{}
				tools[ns] = sub
			}
			sub[name] = tool
		}
		rt := mustNew(t, Options{Tools: tools})
		for _, e := range rt.Catalog() {
			if err := d.AddSignature(e.Segments, e.Signature); err != nil {
				t.Fatal(err)
			}
		}
	}
	d.Check(t, tsc)
}
