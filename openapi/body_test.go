package openapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const bodySpec = `
openapi: 3.1.0
info: {title: Bodies, version: "1"}
paths:
  /items/{id}:
    put:
      operationId: flat
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}, description: The item.}
        - {name: dryRun, in: query, schema: {type: boolean, default: false}}
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Item"}
      responses:
        "200":
          description: ok
          content: {application/json: {schema: {$ref: "#/components/schemas/Item"}}}
  /composed:
    post:
      operationId: composed
      requestBody:
        required: true
        content:
          application/json:
            schema:
              oneOf:
                - {type: object, properties: {a: {type: string}}, required: [a]}
                - {type: object, properties: {b: {type: integer}}, required: [b]}
      responses: {"204": {description: ok}}
  /dict:
    post:
      operationId: dict
      requestBody:
        content:
          application/json:
            schema: {type: object, additionalProperties: {type: string}}
      responses: {"204": {description: ok}}
  /nullable:
    post:
      operationId: nullable
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: [object, "null"], properties: {a: {type: string}}}
      responses: {"204": {description: ok}}
  /array:
    post:
      operationId: array
      requestBody:
        required: true
        content:
          application/vnd.api+json:
            schema: {type: array, items: {type: integer}}
      responses: {"204": {description: ok}}
  /optional:
    patch:
      operationId: optional
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {name: {type: string}}, required: [name]}
      responses: {"204": {description: ok}}
  /optionalOpen:
    patch:
      operationId: optionalFlat
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {name: {type: string}, note: {type: string}}}
      responses: {"204": {description: ok}}
  /conditional:
    post:
      operationId: conditional
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties: {kind: {type: string}, size: {type: integer}}
              dependentRequired: {kind: [size]}
      responses: {"204": {description: ok}}
  /form:
    post:
      operationId: formBody
      requestBody:
        required: true
        content:
          application/x-www-form-urlencoded:
            schema: {type: object}
      responses: {"204": {description: ok}}
components:
  schemas:
    Item:
      type: object
      properties:
        id: {type: string, readOnly: true, description: Assigned by the server.}
        name: {type: string, description: Display name., deprecated: true}
        price: {type: number, minimum: 0, exclusiveMinimum: 0}
        secret: {type: string, writeOnly: true}
        dryRun: {type: boolean}
      required: [id, name]
`

func TestBodyFlattened(t *testing.T) {
	srv := newRecorder(t, nil)
	api := convert(t, bodySpec, Options{BaseURL: srv.URL})
	tool := lookup(t, api.Tools, "flat")
	var in struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	if err := json.Unmarshal([]byte(schemaJSON(t, tool)), &in); err != nil {
		t.Fatal(err)
	}
	// id is readOnly in the body, so only the path's id is left and keeps
	// its name; dryRun is in the query and the body, so both are prefixed.
	var names []string
	for k := range in.Properties {
		names = append(names, k)
	}
	for _, want := range []string{"id", "query_dryRun", "body_dryRun", "name", "price", "secret"} {
		if in.Properties[want] == nil {
			t.Errorf("input lacks %q (has %v)", want, names)
		}
	}
	if len(in.Properties) != 6 {
		t.Errorf("input properties %v", names)
	}
	if !reflect.DeepEqual(in.Required, []string{"id", "name"}) {
		t.Errorf("required = %v", in.Required)
	}
	if in.Properties["id"]["description"] != "The item." || in.Properties["name"]["deprecated"] != true ||
		in.Properties["query_dryRun"]["default"] != false {
		t.Errorf("annotations lost: %v", in.Properties)
	}
	// Output: the named schema Item, whose one declaration serves both
	// directions: writeOnly secret and readOnly id are there, optional.
	out, _ := json.Marshal(tool.Output)
	item, _ := json.Marshal(tool.Types.Schema("Item"))
	if string(out) != `{"$ref":"#/$defs/Item"}` || !strings.Contains(string(item), `"secret"`) || !strings.Contains(string(item), `"id"`) ||
		strings.Contains(string(item), `"required":["id"`) {
		t.Errorf("output schema %s, Item %s", out, item)
	}
	res := value(t, api, `return await tools.api.flat({ id: "i/1", query_dryRun: true, body_dryRun: false, name: "N", price: 2.5 })`)
	if res.(map[string]any)["ok"] != true {
		t.Fatalf("result %v", res)
	}
	got := srv.last(t)
	if got.Method != "PUT" || got.RawPath != "/items/i%2F1" || got.RawQuery != "dryRun=true" {
		t.Errorf("sent %s %s?%s", got.Method, got.RawPath, got.RawQuery)
	}
	if got.Body != `{"name":"N","price":2.5,"dryRun":false}` || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("body %s (%s)", got.Body, got.Header.Get("Content-Type"))
	}
}

func TestBodyWhole(t *testing.T) {
	srv := newRecorder(t, nil)
	api := convert(t, bodySpec, Options{BaseURL: srv.URL})
	cases := []struct {
		tool, input, body, contentType string
		required                       bool
	}{
		{"composed", `{"body": {"b": 2}}`, `{"b": 2}`, "application/json", true},
		{"dict", `{"body": {"k": "v"}}`, `{"k": "v"}`, "application/json", false},
		{"nullable", `{"body": null}`, `null`, "application/json", true},
		{"array", `{"body": [1, 2]}`, `[1, 2]`, "application/vnd.api+json", true},
		{"optional", `{"body": {"name": "x"}}`, `{"name": "x"}`, "application/json", false},
		{"conditional", `{"body": {"kind": "k", "size": 1}}`, `{"kind": "k", "size": 1}`, "application/json", true},
	}
	for _, c := range cases {
		tool := lookup(t, api.Tools, c.tool)
		var in struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		_ = json.Unmarshal([]byte(schemaJSON(t, tool)), &in)
		if len(in.Properties) != 1 || in.Properties["body"] == nil || (len(in.Required) == 1) != c.required {
			t.Errorf("%s: input schema %s", c.tool, schemaJSON(t, tool))
		}
		if _, err := call(t, api, c.tool, c.input); err != nil {
			t.Errorf("%s: %v", c.tool, err)
			continue
		}
		got := srv.last(t)
		if got.Body != c.body || got.Header.Get("Content-Type") != c.contentType {
			t.Errorf("%s: sent %q as %s, want %q as %s", c.tool, got.Body, got.Header.Get("Content-Type"), c.body, c.contentType)
		}
	}
	// The composed body keeps its oneOf, so the runtime validates it.
	res, _ := execute(t, api, 0, `return await tools.api.composed({ body: { c: 1 } })`)
	if res.OK || res.Error.Kind != "InvalidToolInput" {
		t.Fatalf("a body matching no oneOf branch was accepted: %+v", res)
	}
}

func TestOptionalBody(t *testing.T) {
	srv := newRecorder(t, nil)
	api := convert(t, bodySpec, Options{BaseURL: srv.URL})
	if _, err := call(t, api, "optional", `{}`); err != nil {
		t.Fatal(err)
	}
	if got := srv.last(t); got.Body != "" || got.Header.Get("Content-Type") != "" {
		t.Errorf("an omitted optional body was sent: %q", got.Body)
	}
	// An optional body without required fields is flattened; it is sent
	// when a field is given.
	if _, err := call(t, api, "optionalFlat", `{}`); err != nil {
		t.Fatal(err)
	}
	if got := srv.last(t); got.Body != "" {
		t.Errorf("empty flattened optional body sent: %q", got.Body)
	}
	if _, err := call(t, api, "optionalFlat", `{"note": "n"}`); err != nil {
		t.Fatal(err)
	}
	if got := srv.last(t); got.Body != `{"note":"n"}` {
		t.Errorf("body %q", got.Body)
	}
}

// TestFormBodyWhole: a form body without properties is the one field
// "body", an object of the fields to send.
func TestFormBodyWhole(t *testing.T) {
	api := convert(t, bodySpec, Options{})
	if len(api.Skipped) != 0 {
		t.Fatalf("got skipped %+v, want none", api.Skipped)
	}
	if got, want := schemaJSON(t, lookup(t, api.Tools, "formBody")), `{"type":"object","properties":{"body":{"type":"object"}},"required":["body"],"additionalProperties":false}`; got != want {
		t.Errorf("got input schema %s, want %s", got, want)
	}
}
