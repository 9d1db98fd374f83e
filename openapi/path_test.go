package openapi

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

const pathSpec = `
openapi: 3.0.3
info: {title: Paths, version: "1"}
security: [{bearer: []}]
paths:
  /users/{id}/keys:
    get:
      operationId: keys
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /docs/{name}.json:
    get:
      operationId: doc
      parameters: [{name: name, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /pair/{a}{b}/x:
    get:
      operationId: pair
      parameters:
        - {name: a, in: path, required: true, schema: {type: string}}
        - {name: b, in: path, required: true, schema: {type: string}}
      responses: {"200": {description: ok}}
  /list/{ids}:
    get:
      operationId: list
      parameters: [{name: ids, in: path, required: true, schema: {type: array, items: {type: string}}}]
      responses: {"200": {description: ok}}
components:
  securitySchemes:
    bearer: {type: http, scheme: bearer}
`

// TestPathEscapeRefused: a path parameter that a server decoding %2F (or
// more) could resolve to another path is refused, and no request (with
// its credentials) leaves.
func TestPathEscapeRefused(t *testing.T) {
	srv := newRecorder(t, nil)
	api := convert(t, pathSpec, Options{BaseURL: srv.URL + "/api", Credentials: secretCreds("")})
	for _, tc := range []struct{ name, tool, input, key string }{
		{"dot", "keys", `{"id": "."}`, "id"},
		{"dot dot", "keys", `{"id": ".."}`, "id"},
		{"encoded dot", "keys", `{"id": "%2e"}`, "id"},
		{"encoded dot dot, mixed case", "keys", `{"id": "%2E%2e"}`, "id"},
		{"half encoded", "keys", `{"id": ".%2E"}`, "id"},
		{"encoded twice", "keys", `{"id": "%252e%252e"}`, "id"},
		{"IIS %u", "keys", `{"id": "%u002e%u002e"}`, "id"},
		{"climb", "keys", `{"id": "../admin"}`, "id"},
		{"climb from inside", "keys", `{"id": "a/../../admin"}`, "id"},
		{"climb with encoded slash", "keys", `{"id": "..%2fadmin"}`, "id"},
		{"backslash", "keys", `{"id": "..\\admin"}`, "id"},
		{"backslash inside", "keys", `{"id": "a\\.."}`, "id"},
		{"dot piece", "keys", `{"id": "a/./b"}`, "id"},
		{"Tomcat ..;", "keys", `{"id": "..;"}`, "id"},
		{"Tomcat ..;param", "keys", `{"id": "..;jsessionid=x"}`, "id"},
		{"trailing space", "keys", `{"id": ".. "}`, "id"},
		{"NUL", "keys", `{"id": "..\u0000x"}`, "id"},
		{"encoded NUL", "keys", `{"id": "..%00"}`, "id"},
		{"overlong UTF-8", "keys", `{"id": "%c0%ae%c0%ae"}`, "id"},
		{"fullwidth dots", "keys", `{"id": "\uff0e\uff0e"}`, "id"},
		{"empty", "keys", `{"id": ""}`, "id"},
		{"dot before a suffix", "doc", `{"name": "."}`, "name"},
		{"empty pair", "pair", `{"a": "", "b": ""}`, "a"},
		{"two dots from two values", "pair", `{"a": ".", "b": "."}`, "a"},
		{"dot dot across values, encoded", "pair", `{"a": "%", "b": "2e."}`, "a"},
		{"array of one dot dot", "list", `{"ids": [".."]}`, "ids"},
		{"empty array", "list", `{"ids": []}`, "ids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.count()
			_, err := call(t, api, tc.tool, tc.input)
			if err == nil || !strings.Contains(err.Error(), `invalid input property "`+tc.key+`"`) {
				t.Fatalf("%s %s: got error %v, want an invalid input property %q", tc.tool, tc.input, err, tc.key)
			}
			if n := srv.count() - before; n != 0 {
				t.Fatalf("%s %s: got %d requests, want none", tc.tool, tc.input, n)
			}
		})
	}
	// The program sees the refusal as a tool failure it can read.
	res, _ := execute(t, api, 5*time.Second, `try { await tools.api.keys({ id: "../admin" }) } catch (e) { return e.message }`)
	if !res.OK || !strings.Contains(string(res.Value), `cannot be \".\" or \"..\"`) {
		t.Fatalf("got %s %+v, want the refusal's message", res.Value, res.Error)
	}
}

// TestPathOrdinaryValues: values that hold dots but are no dot segment,
// and characters that would end a segment, go through, escaped.
func TestPathOrdinaryValues(t *testing.T) {
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(401)
		}
	})
	api := convert(t, pathSpec, Options{BaseURL: srv.URL + "/api", Credentials: secretCreds("bearer")})
	for _, tc := range []struct{ tool, input, path string }{
		{"keys", `{"id": "a.b"}`, "/api/users/a.b/keys"},
		{"keys", `{"id": "..."}`, "/api/users/.../keys"},
		{"keys", `{"id": ".hidden"}`, "/api/users/.hidden/keys"},
		{"keys", `{"id": "..a"}`, "/api/users/..a/keys"},
		{"keys", `{"id": "a.."}`, "/api/users/a../keys"},
		{"keys", `{"id": "v1.2.3"}`, "/api/users/v1.2.3/keys"},
		{"keys", `{"id": "a/b"}`, "/api/users/a%2Fb/keys"},
		{"keys", `{"id": "x y?z#w"}`, "/api/users/x%20y%3Fz%23w/keys"},
		{"keys", `{"id": "100%"}`, "/api/users/100%25/keys"},
		{"keys", `{"id": "a;b"}`, "/api/users/a%3Bb/keys"},
		{"keys", `{"id": "a\\b"}`, "/api/users/a%5Cb/keys"},
		{"keys", `{"id": "…"}`, "/api/users/%E2%80%A6/keys"},
		{"doc", `{"name": "readme"}`, "/api/docs/readme.json"},
		{"doc", `{"name": ""}`, "/api/docs/.json"},
		{"pair", `{"a": "", "b": "b"}`, "/api/pair/b/x"},
		{"list", `{"ids": ["a", ".."]}`, "/api/list/a,.."},
	} {
		t.Run(tc.input, func(t *testing.T) {
			if _, err := call(t, api, tc.tool, tc.input); err != nil {
				t.Fatalf("%s %s: %v", tc.tool, tc.input, err)
			}
			if got := srv.last(t).RawPath; got != tc.path {
				t.Errorf("%s %s: got path %s, want %s", tc.tool, tc.input, got, tc.path)
			}
		})
	}
}

// Operations told apart by a fragment on one URL (as Box's document
// writes /files/{id}#add_shared_link) become tools of their own, and each
// request goes to the path without its fragment; a query in a path is
// still refused.
func TestPathFragments(t *testing.T) {
	const spec = `
openapi: 3.0.3
info: {title: Frag, version: "1"}
paths:
  /files/{id}#add_link:
    put:
      operationId: addLink
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      requestBody: {content: {application/json: {schema: {type: object, properties: {access: {type: string}}}}}}
      responses: {"200": {description: ok}}
  /files/{id}#remove_link:
    put:
      operationId: removeLink
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /things?kind=a:
    get:
      operationId: things
      responses: {"200": {description: ok}}
`
	srv := newRecorder(t, nil)
	api := convert(t, spec, Options{BaseURL: srv.URL})
	if _, err := call(t, api, "addLink", `{"id": "7", "access": "open"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, api, "removeLink", `{"id": "7"}`); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	reqs := srv.reqs
	srv.mu.Unlock()
	if len(reqs) != 2 || reqs[0].Path != "/files/7" || reqs[1].Path != "/files/7" || !strings.Contains(reqs[0].Body, `"access":"open"`) {
		t.Fatalf("requests %+v", reqs)
	}
	if len(api.Skipped) != 1 || api.Skipped[0].Operation != "things" || !strings.Contains(api.Skipped[0].Reason, "holds a query") {
		t.Fatalf("skipped %+v", api.Skipped)
	}
}
