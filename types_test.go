package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/codemode-go/codemode/internal/tsctest"
	"github.com/google/jsonschema-go/jsonschema"
)

// typedTools are two tools sharing named types, one of them recursive
// and one named in kebab case, as OpenAPI documents name schemas.
func typedTools(t *testing.T, loads *atomic.Int32) Tools {
	t.Helper()
	defs := map[string]string{
		"customer":       `{"type":"object","description":"A customer.","properties":{"id":{"type":"string"},"referrer":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/customer"}]},"address":{"$ref":"#/$defs/postal-address"}},"required":["id"]}`,
		"postal-address": `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
		"Error":          `{"type":"object","properties":{"message":{"type":"string"}}}`,
	}
	types := &Types{Names: []string{"customer", "postal-address", "Error"}, Schema: func(name string) *jsonschema.Schema {
		if loads != nil {
			loads.Add(1)
		}
		s, ok := defs[name]
		if !ok {
			return nil
		}
		return schema(t, s)
	}}
	get := Tool{Description: "Gets a customer.", Types: types,
		Input:  schema(t, `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		Output: schema(t, `{"$ref":"#/$defs/customer"}`),
		Run: func(context.Context, json.RawMessage) (any, error) {
			return map[string]any{"id": "c1"}, nil
		}}
	update := Tool{Description: "Updates an address.", Types: types,
		Input: schema(t, `{"type":"object","properties":{"id":{"type":"string"},"address":{"$ref":"#/$defs/postal-address"}},"required":["id","address"]}`),
		Run:   func(_ context.Context, in json.RawMessage) (any, error) { return json.RawMessage(in), nil }}
	return Tools{"crm": Tools{"get": get, "update": update}}
}

func TestNamedTypes(t *testing.T) {
	var loads atomic.Int32
	rt := mustNew(t, Options{Tools: typedTools(t, &loads)})
	if n := loads.Load(); n != 0 {
		t.Errorf("New converted %d types, want none until needed", n)
	}
	res := rt.Search(SearchRequest{Query: "crm.get"})
	if len(res.Items) != 1 {
		t.Fatalf("search: %+v", res)
	}
	get := res.Items[0]
	if !strings.HasSuffix(get.Signature, "): Promise<Customer>") || !slices.Equal(get.Types, []string{"Customer"}) {
		t.Errorf("signature %s, types %v", get.Signature, get.Types)
	}
	if n := loads.Load(); n != 0 {
		t.Errorf("a signature converted %d types, want none", n)
	}
	got := rt.Types("Customer", "PostalAddress", "ErrorType", "Nope")
	if len(got.Items) != 3 || !slices.Equal(got.Unknown, []string{"Nope"}) {
		t.Fatalf("Types: %+v", got)
	}
	// (A schema decoded from JSON has its properties in name order.)
	want := "/** A customer. */\ntype Customer = {\n  address?: PostalAddress;\n  id: string;\n  referrer?: string | Customer;\n};"
	if got.Items[0].Declaration != want || !slices.Equal(got.Items[0].Types, []string{"Customer", "PostalAddress"}) {
		t.Errorf("Customer:\n%s\n%v\nwant\n%s", got.Items[0].Declaration, got.Items[0].Types, want)
	}
	// A search for a type's name finds its declaration.
	if res := rt.Search(SearchRequest{Query: "PostalAddress"}); len(res.Types) != 1 || res.Types[0].Name != "PostalAddress" {
		t.Errorf("search for a type: %+v", res.Types)
	}
}

// TestNamedTypesBuiltin: a program reads declarations with
// tools.$codemode.types, a call charged like any other, and an input
// that uses a named type is validated against it.
func TestNamedTypesBuiltin(t *testing.T) {
	rt := mustNew(t, Options{Tools: typedTools(t, nil), MaxToolCalls: 2})
	r := run(t, rt, `const r = await tools.$codemode.types({ names: ["Customer", "Missing"] }); return [r.items[0].name, r.unknown, Object.keys(tools.$codemode)]`)
	if got := resultJSON(r); !strings.Contains(got, `"value":["Customer",["Missing"],["search","types"]]`) {
		t.Errorf("got %s", got)
	}
	r = run(t, rt, `return await tools.crm.update({ id: "1", address: { town: "x" } })`)
	if r.Error == nil || r.Error.Kind != InvalidToolInput {
		t.Errorf("an address without its required city: %s", resultJSON(r))
	}
	r = run(t, rt, `return (await tools.crm.update({ id: "1", address: { city: "Oslo" } })).address.city`)
	if got := resultJSON(r); !strings.Contains(got, `"value":"Oslo"`) {
		t.Errorf("got %s", got)
	}
	r = run(t, rt, `await tools.$codemode.types({ names: ["Customer"] }); await tools.$codemode.types({ names: ["Customer"] }); return await tools.$codemode.types({ names: ["Customer"] })`)
	if r.Error == nil || r.Error.Kind != ToolCallLimitExceeded {
		t.Errorf("a third call with MaxToolCalls 2: %s", resultJSON(r))
	}
	for _, in := range []string{`{}`, `{"names":[]}`, `{"names":"Customer"}`, `{"name":"x"}`} {
		r = run(t, rt, fmt.Sprintf(`return await tools.$codemode.types(%s)`, in))
		if r.Error == nil || r.Error.Kind != InvalidToolInput {
			t.Errorf("types(%s): %s", in, resultJSON(r))
		}
	}
}

// TestNamedTypesTypeCheck: signatures and declarations, parts included,
// compile together.
func TestNamedTypesTypeCheck(t *testing.T) {
	tsc := tsctest.Compiler(t)
	tools := typedTools(t, nil)
	// A tool whose input is far past the size bound, cut into parts.
	var props []string
	for i := range 60 {
		props = append(props, fmt.Sprintf(`"f%d":{"type":"object","description":"Field %d.","properties":{"a":{"type":"string"},"b":{"type":"object","properties":{"c":{"$ref":"#/$defs/customer"}}}}}`, i, i))
	}
	crm := tools["crm"].(Tools)
	big := crm["get"].(Tool)
	big.Input = schema(t, `{"type":"object","properties":{`+strings.Join(props, ",")+`}}`)
	crm["big"] = big
	rt := mustNew(t, Options{Tools: tools})
	var d tsctest.Declarations
	lookup := func(name string) (string, []string, bool) {
		r := rt.Types(name)
		if len(r.Items) != 1 {
			return "", nil, false
		}
		return r.Items[0].Declaration, r.Items[0].Types, true
	}
	parts := 0
	for _, e := range rt.Catalog() {
		if len(e.Signature) > 4000 {
			t.Errorf("%s: signature of %d bytes", e.Path, len(e.Signature))
		}
		for _, u := range e.Types {
			if strings.Contains(u, "_") {
				parts++
			}
		}
		if err := d.AddSignature(e.Segments, e.Signature); err != nil {
			t.Fatal(err)
		}
		if err := d.AddTypes(e.Types, lookup); err != nil {
			t.Fatal(err)
		}
	}
	if parts == 0 {
		t.Error("the big signature has no parts")
	}
	d.Check(t, tsc)
}

// A plain tool (no named types) whose schemas are large — an MCP server's
// tool with a wide, nested input, say — gets a signature within the
// bound: its deepest objects are cut out as parts the types built-in
// serves. A plain tree of small tools keeps its view, with no types
// built-in.
func TestLargePlainToolIsBounded(t *testing.T) {
	props := map[string]any{}
	for i := range 60 {
		props[fmt.Sprintf("field%02d", i)] = map[string]any{"type": "object", "description": strings.Repeat("A setting of the widget. ", 3),
			"properties": map[string]any{"mode": map[string]any{"type": "string", "enum": []string{"fast", "slow", "balanced"}},
				"limits": map[string]any{"type": "object", "properties": map[string]any{"min": map[string]any{"type": "number"}, "max": map[string]any{"type": "number"}}}}}
	}
	in, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
	wide := Tool{Description: "Configures a widget.", Input: schema(t, string(in)),
		Run: func(_ context.Context, in json.RawMessage) (any, error) { return "ok", nil }}
	small := Tool{Description: "Pings.", Run: func(context.Context, json.RawMessage) (any, error) { return "pong", nil }}

	rt := mustNew(t, Options{Tools: Tools{"w": Tools{"configure": wide, "ping": small}}})
	var sig CatalogEntry
	for _, e := range rt.Catalog() {
		if e.Path == "w.configure" {
			sig = e
		}
	}
	if len(sig.Signature) > 4000 || len(sig.Types) == 0 {
		t.Fatalf("signature of %d bytes, types %v", len(sig.Signature), sig.Types)
	}
	r := run(t, rt, fmt.Sprintf(`const r = await tools.$codemode.types({ names: [%q] }); return [r.items.length, r.items[0].declaration.length > 0, Object.keys(tools.$codemode)]`, sig.Types[0]))
	if got := resultJSON(r); !strings.Contains(got, `"value":[1,true,["search","types"]]`) {
		t.Fatalf("the types built-in: %s", got)
	}
	small2 := mustNew(t, Options{Tools: Tools{"w": Tools{"ping": small}}})
	r = run(t, small2, `return Object.keys(tools.$codemode)`)
	if got := resultJSON(r); !strings.Contains(got, `"value":["search"]`) {
		t.Fatalf("a small plain tree's built-ins: %s", got)
	}
}
