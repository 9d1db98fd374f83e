package openapi

import (
	"net/url"
	"strings"
	"testing"
)

const paramSpec = `
openapi: 3.0.3
info: {title: Params, version: "1"}
paths:
  /form/{id}:
    get:
      operationId: form
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer}}
        - {name: tags, in: query, schema: {type: array, items: {type: string}}}
        - {name: ids, in: query, explode: false, schema: {type: array, items: {type: integer}}}
        - {name: point, in: query, schema: {type: object, properties: {x: {type: number}, y: {type: number}}}}
        - {name: box, in: query, explode: false, schema: {type: object, properties: {w: {type: integer}, h: {type: integer}}}}
        - {name: q, in: query, schema: {type: string}}
        - {name: raw, in: query, allowReserved: true, schema: {type: string}}
        - {name: flag, in: query, schema: {type: boolean}}
        - {name: empty, in: query, schema: {type: array, items: {type: string}}}
        - {name: filter, in: query, content: {application/json: {schema: {type: object}}}}
      responses: {"200": {description: ok}}
  /deep:
    get:
      operationId: deep
      parameters:
        - name: filter
          in: query
          style: deepObject
          explode: true
          schema:
            type: object
            properties:
              status: {type: string}
              range: {type: object, properties: {from: {type: integer}, to: {type: integer}}}
              tags: {type: array, items: {type: string}}
      responses: {"200": {description: ok}}
  /simple/{list}/{obj}/{objx}/{name}:
    get:
      operationId: simple
      parameters:
        - {name: list, in: path, required: true, schema: {type: array, items: {type: string}}}
        - {name: obj, in: path, required: true, schema: {type: object}}
        - {name: objx, in: path, required: true, explode: true, schema: {type: object}}
        - {name: name, in: path, required: true, schema: {type: string}}
        - {name: X-Ids, in: header, schema: {type: array, items: {type: integer}}}
        - {name: X-Obj, in: header, explode: true, schema: {type: object}}
        - {name: X-Plain, in: header, schema: {type: string}}
        - {name: Accept, in: header, schema: {type: string}}
        - {name: Authorization, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}
`

func TestQueryForm(t *testing.T) {
	srv := newRecorder(t, nil)
	api := convert(t, paramSpec, Options{BaseURL: srv.URL + "/base"})
	cases := []struct{ input, path, query string }{
		{`{"id": 7}`, "/base/form/7", ""},
		{`{"id": 7, "tags": ["a", "b c"]}`, "/base/form/7", "tags=a&tags=b%20c"},
		{`{"id": 7, "ids": [1, 2, 3]}`, "/base/form/7", "ids=1,2,3"},
		{`{"id": 7, "point": {"y": 2, "x": 1.5}}`, "/base/form/7", "x=1.5&y=2"},
		{`{"id": 7, "box": {"w": 3, "h": 4}}`, "/base/form/7", "box=h,4,w,3"},
		{`{"id": 7, "q": "a&b=c,d/é"}`, "/base/form/7", "q=a%26b%3Dc%2Cd%2F%C3%A9"},
		{`{"id": 7, "raw": "a/b:c,d#e"}`, "/base/form/7", "raw=a/b:c,d%23e"},
		{`{"id": 7, "flag": false}`, "/base/form/7", "flag=false"},
		{`{"id": 7, "empty": []}`, "/base/form/7", "empty="},
		{`{"id": 7, "filter": {"a": [1, 2]}}`, "/base/form/7", "filter=%7B%22a%22%3A%5B1%2C2%5D%7D"},
		{`{"id": 12345678901234567890}`, "/base/form/12345678901234567890", ""},
		{`{"id": 7, "q": null}`, "/base/form/7", ""},
	}
	for _, c := range cases {
		if _, err := call(t, api, "form", c.input); err != nil {
			t.Errorf("%s: %v", c.input, err)
			continue
		}
		got := srv.last(t)
		if got.Path != c.path || got.RawQuery != c.query {
			t.Errorf("%s: sent %s?%s, want %s?%s", c.input, got.Path, got.RawQuery, c.path, c.query)
		}
	}
}

func TestQueryDeepObject(t *testing.T) {
	srv := newRecorder(t, nil)
	api := convert(t, paramSpec, Options{BaseURL: srv.URL})
	if _, err := call(t, api, "deep", `{"filter": {"status": "open", "range": {"from": 1, "to": 9}, "tags": ["x", "y"]}}`); err != nil {
		t.Fatal(err)
	}
	got := srv.last(t).RawQuery
	want := "filter[range][from]=1&filter[range][to]=9&filter[status]=open&filter[tags]=x&filter[tags]=y"
	if got != want {
		t.Fatalf("query %q, want %q", got, want)
	}
	if q, err := url.ParseQuery(got); err != nil || q.Get("filter[status]") != "open" {
		t.Fatalf("a server cannot read %q: %v", got, err)
	}
}

func TestPathAndHeaderSimple(t *testing.T) {
	srv := newRecorder(t, nil)
	api := convert(t, paramSpec, Options{BaseURL: srv.URL})
	_, err := call(t, api, "simple", `{
		"list": ["a", "b/c", "d,e"], "obj": {"role": "admin", "n": 1}, "objx": {"role": "admin", "n": 1},
		"name": "x y?#", "X-Ids": [1, 2], "X-Obj": {"a": "b", "c": "d"}, "X-Plain": "plain, text"}`)
	if err != nil {
		t.Fatal(err)
	}
	got := srv.last(t)
	if want := "/simple/a,b%2Fc,d%2Ce/n,1,role,admin/n=1,role=admin/x%20y%3F%23"; got.RawPath != want {
		t.Errorf("path %q, want %q", got.RawPath, want)
	}
	for h, want := range map[string]string{"X-Ids": "1,2", "X-Obj": "a=b,c=d", "X-Plain": "plain, text"} {
		if v := got.Header.Get(h); v != want {
			t.Errorf("header %s = %q, want %q", h, v, want)
		}
	}
	// Accept and Authorization parameters are ignored, as the specification says.
	in := schemaJSON(t, lookup(t, api.Tools, "simple"))
	if strings.Contains(in, `"Accept"`) || strings.Contains(in, `"Authorization"`) {
		t.Errorf("Accept/Authorization parameters reached the input: %s", in)
	}
	if got.Header.Get("Authorization") != "" {
		t.Errorf("Authorization header sent without a scheme")
	}
}

func TestHeaderInjectionRefused(t *testing.T) {
	srv := newRecorder(t, nil)
	api := convert(t, paramSpec, Options{BaseURL: srv.URL})
	_, err := call(t, api, "simple", `{"list": ["a"], "obj": {}, "objx": {}, "name": "n", "X-Plain": "a\r\nX-Evil: 1"}`)
	if err == nil || !strings.Contains(err.Error(), "control character") {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if srv.count() != 0 {
		t.Fatal("the request was sent")
	}
}

func TestRequiredPathParameterMissing(t *testing.T) {
	srv := newRecorder(t, nil)
	api := convert(t, paramSpec, Options{BaseURL: srv.URL})
	// Run directly, as a host would without the runtime's validation.
	if _, err := call(t, api, "form", `{}`); err == nil || !strings.Contains(err.Error(), `missing required input property "id"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := call(t, api, "form", `{"id": 1, "nope": 2}`); err == nil || !strings.Contains(err.Error(), `unknown input property "nope"`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := call(t, api, "form", `[1]`); err == nil || !strings.Contains(err.Error(), "must be an object") {
		t.Fatalf("err = %v", err)
	}
}
