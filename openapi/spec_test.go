package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
)

// largeSpec reads a spec fetched by `make specs`, or skips.
func largeSpec(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "large", name))
	if err != nil {
		t.Skipf("testdata/large/%s is missing: run `make specs` to fetch it (%v)", name, err)
	}
	return data
}

// report logs a conversion's numbers and returns the skip reasons
// histogram, with parameter names and media types generalized.
func report(t *testing.T, api *API, took time.Duration) map[string]int {
	t.Helper()
	hist := map[string]int{}
	for _, s := range api.Skipped {
		hist[s.Reason]++
	}
	reasons := make([]string, 0, len(hist))
	for r := range hist {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		return hist[reasons[i]] > hist[reasons[j]] || hist[reasons[i]] == hist[reasons[j]] && reasons[i] < reasons[j]
	})
	t.Logf("%q (namespace %s): %d tools, %d skipped, converted in %v", api.Title, api.Namespace, countTools(api.Tools), len(api.Skipped), took)
	for _, r := range reasons {
		t.Logf("  skipped %4d × %s", hist[r], r)
	}
	return hist
}

// mountable checks that a runtime accepts the tools: every input schema
// resolves and no path clashes.
func mountable(t *testing.T, api *API) *codemode.Runtime {
	t.Helper()
	unvalidated := 0
	var walk func(codemode.Tools)
	walk = func(tools codemode.Tools) {
		for _, v := range tools {
			switch x := v.(type) {
			case codemode.Tool:
				if x.SkipInputValidation {
					unvalidated++
				}
			case codemode.Tools:
				walk(x)
			}
		}
	}
	walk(api.Tools)
	if unvalidated > 0 {
		t.Errorf("%d tools have input schemas that do not resolve", unvalidated)
	}
	rt, err := codemode.New(codemode.Options{Tools: codemode.Tools{api.Namespace: api.Tools}})
	if err != nil {
		t.Fatalf("the runtime refused the tools: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// convertLarge converts a spec fetched by `make specs` (or skips), logs
// its numbers, checks its size and namespace, and mounts its tools.
func convertLarge(t *testing.T, name, namespace string, minTools int) (*API, *codemode.Runtime) {
	t.Helper()
	data := largeSpec(t, name)
	start := time.Now()
	api, err := FromSpec(data, Options{})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	report(t, api, took)
	if n := countTools(api.Tools); n < minTools {
		t.Fatalf("only %d tools", n)
	}
	if api.Namespace != namespace {
		t.Errorf("namespace %q, want %q", api.Namespace, namespace)
	}
	return api, mountable(t, api)
}

// githubRuntime is GitHub's REST API mounted in a runtime.
func githubRuntime(t *testing.T) (*API, *codemode.Runtime) {
	t.Helper()
	return convertLarge(t, "api.github.com.json", "github", 800)
}

func TestGitHubSpec(t *testing.T) {
	api, _ := githubRuntime(t)
	// Spot checks: GitHub's operationIds nest, and a known operation's
	// input and output look right.
	get := lookup(t, api.Tools, "repos.getContent")
	in := schemaJSON(t, get)
	for _, want := range []string{`"owner"`, `"repo"`, `"path"`, `"ref"`, `"required":["owner","repo","path"]`} {
		if !strings.Contains(in, want) {
			t.Errorf("repos.getContent input lacks %s: %s", want, in)
		}
	}
	create := lookup(t, api.Tools, "issues.create")
	in = schemaJSON(t, create)
	if !strings.Contains(in, `"title"`) || !strings.Contains(in, `"labels"`) || create.Output == nil {
		t.Errorf("issues.create: input %s, output %v", in, create.Output != nil)
	}
}

func TestFigmaSpec(t *testing.T) {
	convertLarge(t, "figma-openapi.yaml", "figma", 40)
}

// TestCircularSpec: recursive schemas convert, bounded.
func TestCircularSpec(t *testing.T) {
	data, err := os.ReadFile("../testdata/openapi/circular.yaml")
	if err != nil {
		t.Fatal(err)
	}
	api, err := FromSpec(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(api.Skipped) != 0 || countTools(api.Tools) != 4 {
		t.Fatalf("tools %d, skipped %v", countTools(api.Tools), api.Skipped)
	}
	mountable(t, api)
	// Recursion ends at a name: the schemas refer to the document's named
	// schemas, which are converted on their own.
	types := lookup(t, api.Tools, "trees.get").Types
	if types == nil {
		t.Fatal("no named types")
	}
	for _, p := range []string{"trees.get", "trees.put", "people.create", "loop"} {
		tool := lookup(t, api.Tools, p)
		if tool.Types != types {
			t.Errorf("%s: the tools do not share one Types", p)
		}
		for _, s := range []any{tool.Input, tool.Output} {
			b, _ := json.Marshal(s)
			if len(b) > 20000 {
				t.Errorf("%s: schema of %d bytes", p, len(b))
			}
			for _, m := range regexp.MustCompile(`"\$ref":"([^"]*)"`).FindAllStringSubmatch(string(b), -1) {
				name, ok := strings.CutPrefix(m[1], "#/$defs/")
				if !ok || !slices.Contains(types.Names, name) {
					t.Errorf("%s: reference %s is not to a named type", p, m[1])
				}
			}
		}
	}
	out, _ := json.Marshal(lookup(t, api.Tools, "trees.get").Output)
	if string(out) != `{"$ref":"#/$defs/Tree"}` {
		t.Errorf("Tree output %s", out)
	}
	tree, _ := json.Marshal(types.Schema("Tree"))
	if !strings.Contains(string(tree), `"items":{"$ref":"#/$defs/Tree"}`) {
		t.Errorf("Tree type %s", tree)
	}
	loop, _ := json.Marshal(types.Schema("Loop"))
	if len(loop) > 2000 {
		t.Errorf("self-reference gave %s", loop)
	}
}

func TestSwagger2Refused(t *testing.T) {
	for _, spec := range []string{
		`{"swagger": "2.0", "info": {"title": "t", "version": "1"}, "paths": {}}`,
		"swagger: '2.0'\ninfo: {title: t, version: '1'}\npaths: {}\n",
	} {
		_, err := FromSpec([]byte(spec), Options{})
		if err == nil || !strings.Contains(err.Error(), "Swagger 2.0") || !strings.Contains(err.Error(), "OpenAPI 3") {
			t.Errorf("err = %v", err)
		}
	}
}

func TestMalformedRefused(t *testing.T) {
	cases := map[string]string{
		"empty":         "",
		"blank":         "  \n",
		"bad json":      `{"openapi": "3.0.0", "info": {`,
		"bad yaml":      "openapi: 3.0.0\ninfo: [unclosed\n",
		"not a mapping": "- a\n- b\n",
		"no version":    `{"info": {"title": "t"}, "paths": {}}`,
		"version 4":     `{"openapi": "4.0.0", "info": {"title": "t", "version": "1"}, "paths": {}}`,
		"scalar":        "42",
	}
	for name, spec := range cases {
		api, err := FromSpec([]byte(spec), Options{})
		if err == nil || !strings.HasPrefix(err.Error(), "openapi: ") {
			t.Errorf("%s: api %v, err %v", name, api, err)
		}
	}
}

// TestExternalRefsNotFetched: references to other files and URLs are not
// followed; the operation still converts with an open schema.
func TestExternalRefsNotFetched(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, `{"type": "string"}`)
	}))
	defer srv.Close()
	spec := fmt.Sprintf(`
openapi: 3.0.3
info: {title: Ext, version: "1"}
paths:
  /x:
    post:
      operationId: x
      requestBody:
        required: true
        content: {application/json: {schema: {$ref: "%s/schema.json"}}}
      responses:
        "200":
          description: ok
          content: {application/json: {schema: {$ref: "./local.yaml#/Thing"}}}
`, srv.URL)
	api, err := FromSpec([]byte(spec), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 0 {
		t.Fatal("the converter fetched a remote reference")
	}
	tool := lookup(t, api.Tools, "x")
	out, _ := json.Marshal(tool.Output)
	if !strings.Contains(schemaJSON(t, tool), "unresolved reference") || !strings.Contains(string(out), "unresolved reference") {
		t.Errorf("input %s output %s", schemaJSON(t, tool), out)
	}
}

func TestSkipReasons(t *testing.T) {
	api := convert(t, `
openapi: 3.1.0
info: {title: Skips, version: "1"}
paths:
  /cookie:
    get:
      operationId: cookieRequired
      parameters: [{name: sid, in: cookie, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /cookieOptional:
    get:
      operationId: cookieOptional
      parameters: [{name: sid, in: cookie, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /pipes:
    get:
      operationId: pipes
      parameters: [{name: ids, in: query, style: pipeDelimited, schema: {type: array, items: {type: string}}}]
      responses: {"200": {description: ok}}
  /matrix/{id}:
    get:
      operationId: matrix
      parameters: [{name: id, in: path, required: true, style: matrix, schema: {type: string}}]
      responses: {"200": {description: ok}}
  /upload:
    post:
      operationId: upload
      requestBody:
        required: true
        content: {multipart/mixed: {schema: {type: object}}}
      responses: {"200": {description: ok}}
  /download:
    get:
      operationId: download
      responses: {"200": {description: ok, content: {application/octet-stream: {schema: {type: string, format: binary}}}}}
  /events:
    get:
      operationId: events
      responses: {"200": {description: ok, content: {text/event-stream: {schema: {type: string}}}}}
  /undeclared/{id}:
    get:
      operationId: undeclared
      responses: {"200": {description: ok}}
  /either:
    get:
      operationId: either
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: object}}, application/pdf: {}}}
`, Options{})
	got := map[string]string{}
	for _, s := range api.Skipped {
		got[s.Operation] = s.Reason
	}
	want := map[string]string{
		"cookieRequired": `required cookie parameter "sid" is not supported`,
		"pipes":          `query parameter "ids" uses style "pipeDelimited", which is not supported`,
		"matrix":         `path parameter "id" uses style "matrix", which is not supported`,
		"upload":         "request body media type multipart/mixed is not supported",
		"download":       "binary response (application/octet-stream) is not supported (only JSON and text)",
		"events":         "streaming response (text/event-stream) is not supported (only JSON and text)",
		"undeclared":     "path parameter {id} is not declared",
	}
	if len(got) != len(want) {
		t.Errorf("skipped %v", got)
	}
	for op, reason := range want {
		if got[op] != reason {
			t.Errorf("%s: reason %q, want %q", op, got[op], reason)
		}
	}
	lookup(t, api.Tools, "cookieOptional")
	lookup(t, api.Tools, "either")
	if s := schemaJSON(t, lookup(t, api.Tools, "cookieOptional")); strings.Contains(s, "sid") {
		t.Errorf("optional cookie in the input: %s", s)
	}
}

// TestSchemaKeywords: OpenAPI 3.0 keywords become JSON Schema 2020-12,
// annotations survive, and what Go's regexp cannot run is kept as text.
func TestSchemaKeywords(t *testing.T) {
	api := convert(t, `
openapi: 3.0.3
info: {title: Keywords, version: "1"}
paths:
  /k:
    post:
      operationId: k
      summary: "  Make a k.  "
      description: "Longer text.\n"
      deprecated: true
      parameters:
        - name: n
          in: query
          schema: {type: integer, minimum: 1, exclusiveMinimum: true, maximum: 9, exclusiveMaximum: false, default: 5, format: int32}
        - name: status
          in: query
          schema: {type: string, nullable: true, enum: [a, b]}
        - name: slug
          in: query
          schema: {type: string, pattern: "^(?!-)[a-z-]+$"}
        - name: ref
          in: query
          schema: {$ref: "#/components/schemas/Named", description: ignored in 3.0}
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object, properties: {note: {type: string, required: true}}}
      responses:
        "200":
          description: ok
          content: {application/json: {schema: {type: object, properties: {n: {type: integer}}}}}
components:
  schemas:
    Named: {type: string, description: From the component.}
`, Options{})
	tool := lookup(t, api.Tools, "k")
	if tool.Description != "Deprecated. Make a k.\n\nLonger text." {
		t.Errorf("description %q", tool.Description)
	}
	var in struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal([]byte(schemaJSON(t, tool)), &in); err != nil {
		t.Fatal(err)
	}
	n, status, slug, ref := in.Properties["n"], in.Properties["status"], in.Properties["slug"], in.Properties["ref"]
	if n["exclusiveMinimum"] != 1.0 || n["minimum"] != nil || n["maximum"] != 9.0 || n["default"] != 5.0 || n["format"] != "int32" {
		t.Errorf("n = %v", n)
	}
	if fmt.Sprint(status["type"]) != "[string null]" || fmt.Sprint(status["enum"]) != "[a b <nil>]" {
		t.Errorf("status = %v", status)
	}
	if slug["pattern"] != nil || !strings.Contains(fmt.Sprint(slug["description"]), "Pattern: ^(?!-)[a-z-]+$") {
		t.Errorf("slug = %v", slug)
	}
	if ref["description"] != "From the component." {
		t.Errorf("3.0 $ref sibling not ignored: %v", ref)
	}
	if in.Properties["note"] == nil || strings.Contains(schemaJSON(t, tool), `"required"`) {
		t.Errorf("a property's \"required: true\" was taken as a list: %s", schemaJSON(t, tool))
	}
	res, _ := execute(t, api, 5*time.Second, `return await tools.api.k({ n: 1 })`)
	if res.OK || res.Error.Kind != "InvalidToolInput" {
		t.Errorf("n=1 passed exclusiveMinimum 1: %+v", res)
	}
	res, _ = execute(t, api, 5*time.Second, `return await tools.api.k({ nope: 1 })`)
	if res.OK || res.Error.Kind != "InvalidToolInput" {
		t.Errorf("an unknown property passed validation: %+v", res)
	}
}

// TestRefSiblings31: in 3.1 a $ref's siblings apply over the target.
func TestRefSiblings31(t *testing.T) {
	api := convert(t, `
openapi: 3.1.0
info: {title: Siblings, version: "1"}
paths:
  /s:
    get:
      operationId: s
      parameters:
        - {name: a, in: query, schema: {$ref: "#/components/schemas/Named", description: Overridden., deprecated: true}}
      responses: {"200": {description: ok}}
components:
  schemas:
    Named: {type: string, description: From the component.}
`, Options{})
	var in struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	_ = json.Unmarshal([]byte(schemaJSON(t, lookup(t, api.Tools, "s"))), &in)
	if a := in.Properties["a"]; a["description"] != "Overridden." || a["deprecated"] != true || a["type"] != "string" {
		t.Errorf("a = %v", a)
	}
}

// TestOutputSchemaChoice: 200 before 201 before other 2xx; default only
// without 2xx.
func TestOutputSchemaChoice(t *testing.T) {
	api := convert(t, `
openapi: 3.0.3
info: {title: Out, version: "1"}
paths:
  /a:
    get:
      operationId: a
      responses:
        "202": {description: x, content: {application/json: {schema: {title: two-oh-two}}}}
        "201": {description: x, content: {application/json: {schema: {title: two-oh-one}}}}
  /b:
    get:
      operationId: b
      responses:
        default: {description: x, content: {application/json: {schema: {title: default}}}}
  /c:
    get:
      operationId: c
      responses:
        "204": {description: none}
        default: {description: x, content: {application/json: {schema: {title: error}}}}
`, Options{})
	for tool, want := range map[string]string{"a": "two-oh-one", "b": "default"} {
		if out := lookup(t, api.Tools, tool).Output; out == nil || out.Title != want {
			t.Errorf("%s output %+v, want %s", tool, out, want)
		}
	}
	if out := lookup(t, api.Tools, "c").Output; out != nil {
		t.Errorf("c output %+v, want none", out)
	}
}

// TestBrokenRefsTolerated: references to nothing do not sink the
// document. A schema reference becomes an open schema with a note; a
// parameter libopenapi could not build skips its operation rather than
// leave a tool that cannot send it.
func TestBrokenRefsTolerated(t *testing.T) {
	api := convert(t, `
openapi: 3.0.3
info: {title: Broken, version: "1"}
paths:
  /x:
    post:
      operationId: x
      requestBody: {content: {application/json: {schema: {type: object, properties: {a: {$ref: "#/components/schemas/Missing"}}}}}}
      responses: {"200": {description: ok}}
  /y:
    post:
      operationId: y
      parameters: [{name: a, in: query, schema: {$ref: "#/components/schemas/Missing"}}]
      responses: {"200": {description: ok}}
  /z:
    post:
      operationId: z
      parameters: [{$ref: "#/components/parameters/Missing"}]
      responses: {"200": {description: ok}}
`, Options{})
	in := schemaJSON(t, lookup(t, api.Tools, "x"))
	if !strings.Contains(in, `"a":{"description":"(unresolved reference Missing)"}`) {
		t.Errorf("input %s", in)
	}
	if len(api.Skipped) != 2 || !strings.Contains(api.Skipped[0].Reason, "parameter could not be read") {
		t.Errorf("skipped %v", api.Skipped)
	}
}

// TestConcurrentConversions: FromSpec may be called from many goroutines
// (libopenapi keeps some process-wide caches).
func TestConcurrentConversions(t *testing.T) {
	specs := []string{paramSpec, bodySpec, authSpec, clientSpec, serverSpec}
	errs := make(chan error, 2*len(specs))
	for range 2 {
		for _, s := range specs {
			go func() {
				_, err := FromSpec([]byte(s), Options{})
				errs <- err
			}()
		}
	}
	for range 2 * len(specs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
