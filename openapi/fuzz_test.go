package openapi

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/codemode-go/codemode"
)

// FuzzFromSpec: no input makes the conversion panic or hang, and whatever
// it converts is a well-formed tool tree. It calls fromSpec, without the
// recover FromSpec adds, so that a panic anywhere (here or in libopenapi)
// is found rather than turned into an error. The seeds are
// testdata/fuzz/FuzzFromSpec (one is a panic the fuzzer found), the test
// documents and the demo's.
func FuzzFromSpec(f *testing.F) {
	for _, p := range []string{"../testdata/openapi/circular.yaml", "../cmd/codemode/internal/demo/shop.yaml"} {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{paramSpec, bodySpec, authSpec, clientSpec, serverSpec} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		api, err := fromSpec(data, Options{})
		if err != nil {
			if api != nil {
				t.Fatal("an API along with an error")
			}
			return
		}
		var walk func(codemode.Tools, int)
		walk = func(tools codemode.Tools, depth int) {
			for name, v := range tools {
				switch x := v.(type) {
				case codemode.Tool:
					if x.Run == nil || x.Input == nil {
						t.Fatalf("tool %s is incomplete", name)
					}
					if _, err := json.Marshal(x.Input); err != nil {
						t.Fatalf("tool %s: input schema does not marshal: %v", name, err)
					}
					if _, err := json.Marshal(x.Output); err != nil {
						t.Fatalf("tool %s: output schema does not marshal: %v", name, err)
					}
				case codemode.Tools:
					if len(x) == 0 {
						t.Fatalf("empty namespace %s", name)
					}
					walk(x, depth+1)
				default:
					t.Fatalf("%s is a %T", name, v)
				}
			}
		}
		walk(api.Tools, 0)
	})
}
