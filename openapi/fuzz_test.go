package openapi

import (
	"context"
	"encoding/json"
	"io"
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
	for _, s := range []string{paramSpec, bodySpec, authSpec, clientSpec, serverSpec, formSpec, formSpec31} {
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

// FuzzBodyInput: no input a program passes makes writing a form,
// multipart, text or binary body panic, and a body that is written can be
// read back whole.
func FuzzBodyInput(f *testing.F) {
	for _, in := range []string{
		`{"name": "n", "tags": ["a"], "filter": {"x": {"y": [1, {}]}}, "meta": null}`,
		`{"file": {"data": "aGk=", "filename": "a\"b", "contentType": "text/plain; charset=utf-8"}, "attachments": [{"data": ""}], "meta": [1]}`,
		`{"body": {"data": "-_-_", "contentType": "a/b"}}`,
		`{"body": "text"}`,
		`{"body": {"a": {"b": []}}}`,
		`{"avatar": {"data": "===="}, "spec": {"data": 1}, "extra": [1]}`,
	} {
		f.Add(in)
	}
	var ops []*operation
	for _, spec := range []string{formSpec, formSpec31} {
		o, _ := plans(f, []byte(spec))
		for _, op := range o {
			op.server = "http://127.0.0.1:1"
			ops = append(ops, op)
		}
	}
	f.Fuzz(func(t *testing.T, input string) {
		for _, o := range ops {
			req, err := o.request(context.Background(), json.RawMessage(input))
			if err != nil || req.Body == nil {
				continue
			}
			if _, err := io.ReadAll(req.Body); err != nil {
				t.Fatalf("%s: the body cannot be read: %v", o.id, err)
			}
		}
	})
}
