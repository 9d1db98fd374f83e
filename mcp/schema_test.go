package mcp

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/google/jsonschema-go/jsonschema"
)

// The exported schemas hold what a Runtime returns and takes: results
// that succeed, fail, and are suspended validate against ResultSchema,
// and ExecuteInputSchema takes a program and refuses anything else.
func TestExportedSchemas(t *testing.T) {
	resolve := func(raw json.RawMessage) *jsonschema.Resolved {
		t.Helper()
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	result := resolve(ResultSchema())
	rt, err := codemode.New(codemode.Options{Timeout: 300 * time.Millisecond, StateKey: make([]byte, 32), Tools: codemode.Tools{"t": codemode.Tools{"echo": codemode.Tool{
		Run: func(_ context.Context, in json.RawMessage) (any, error) { return json.RawMessage(in), nil }}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var results []codemode.Result
	for _, code := range []string{`console.log("hi"); return [1, await tools.t.echo({ a: 1 })]`, `throw new Error("no")`, `return tools.nope.x()`, `for (;;) {}`} {
		res, _ := rt.Execute(context.Background(), "// @exec: output=100000\n"+code)
		results = append(results, res)
	}
	res, _, err := rt.ExecuteSuspendable(context.Background(), `return await tools.t.echo({ b: 2 })`)
	if err != nil {
		t.Fatal(err)
	}
	results = append(results, res)
	for _, r := range results {
		b, _ := json.Marshal(r)
		var v any
		_ = json.Unmarshal(b, &v)
		if err := result.Validate(v); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	in := resolve(ExecuteInputSchema(false))
	if err := in.Validate(map[string]any{"code": "return 1"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []any{map[string]any{}, map[string]any{"code": 1}, map[string]any{"code": "x", "yieldMs": 5}} {
		if in.Validate(bad) == nil {
			t.Errorf("%v passed", bad)
		}
	}
	if err := resolve(ExecuteInputSchema(true)).Validate(map[string]any{"code": "x", "yieldMs": 5}); err != nil {
		t.Error(err)
	}
	a := ResultSchema()
	a[0] = 'X'
	if ResultSchema()[0] != '{' {
		t.Error("ResultSchema shares its bytes")
	}
}
