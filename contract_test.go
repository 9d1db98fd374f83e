package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestReadingThrowsIsTheProgramsException: a value whose reading throws
// (a getter, toJSON, a proxy trap) is the program's exception, one rule at
// both boundaries: a tool call rejects with it (never a synchronous
// throw), and a returned value fails the run with it. A value that is not
// data stays InvalidDataValue.
func TestReadingThrowsIsTheProgramsException(t *testing.T) {
	echo := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	rt := mustNew(t, Options{Tools: Tools{"t": Tools{"echo": echo}}})
	throwers := map[string]string{
		"getter":     `({ get a() { throw new Error("boom") } })`,
		"toJSON":     `({ toJSON() { throw new Error("boom") } })`,
		"get trap":   `new Proxy({}, { get() { throw new Error("boom") } })`,
		"keys trap":  `new Proxy({}, { ownKeys() { throw new Error("boom") } })`,
		"descriptor": `new Proxy({ a: 1 }, { getOwnPropertyDescriptor() { throw new Error("boom") } })`,
	}
	for name, value := range throwers {
		t.Run("input "+name, func(t *testing.T) {
			res := run(t, rt, `let p
				try { p = tools.t.echo(`+value+`) } catch (e) { return "thrown synchronously: " + e.message }
				try { await p; return "resolved" } catch (e) { return ["rejected", e.message] }`)
			if got := string(res.Value); got != `["rejected","boom"]` {
				t.Errorf("got %s", resultJSON(res))
			}
			// The run goes on after an unhandled one too: it is reported
			// as the program's exception.
			res = run(t, rt, `await tools.t.echo(`+value+`)`)
			if res.OK || res.Error.Kind != ExecutionFailure || res.Error.Message != "Error: boom" {
				t.Errorf("unhandled: got %s", resultJSON(res))
			}
		})
		t.Run("result "+name, func(t *testing.T) {
			res := run(t, rt, `return `+value)
			if res.OK || res.Error.Kind != ExecutionFailure || res.Error.Message != "Error: boom" {
				t.Errorf("got %s, want ExecutionFailure Error: boom", resultJSON(res))
			}
		})
	}
	res := run(t, rt, `return { f() {} }`)
	if res.OK || res.Error.Kind != InvalidDataValue {
		t.Errorf("a function: got %s, want InvalidDataValue", resultJSON(res))
	}
	res = run(t, rt, `try { await tools.t.echo({ f() {} }) } catch (e) { return e.kind }`)
	if string(res.Value) != `"InvalidDataValue"` {
		t.Errorf("a function in the input: got %s", resultJSON(res))
	}
}

// TestValidateOutput: a host may have a tool's results checked against its
// output schema; off by default, as real services drift from theirs.
func TestValidateOutput(t *testing.T) {
	schema := &jsonschema.Schema{Type: "object", Required: []string{"id"}, Properties: map[string]*jsonschema.Schema{"id": {Type: "string"}}}
	drifting := func(validate bool) Tool {
		return Tool{Output: schema, ValidateOutput: validate, Run: func(context.Context, json.RawMessage) (any, error) {
			return map[string]any{"ID": 7}, nil
		}}
	}
	rt := mustNew(t, Options{Tools: Tools{"t": Tools{"strict": drifting(true), "lenient": drifting(false)}}})
	res := run(t, rt, `const lenient = await tools.t.lenient({})
		try { await tools.t.strict({}) } catch (e) { return [lenient, e.kind, e.message] }`)
	var got []any
	_ = json.Unmarshal(res.Value, &got)
	if len(got) != 3 || got[1] != "InvalidToolOutput" || !strings.Contains(got[2].(string), "does not match its output schema") {
		t.Errorf("got %s", resultJSON(res))
	}
	if _, err := New(Options{Tools: Tools{"t": Tools{"x": Tool{ValidateOutput: true, Run: drifting(true).Run}}}}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("ValidateOutput without Output: %v", err)
	}
}
