package openapi

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestBodiesInRealDocuments: in published documents, every operation with
// a request body either sends it or is skipped with a reason; none keeps a
// tool that drops its payload. It logs, per document, how the bodies are
// sent. The Petstore and ReadMe documents are excerpts of their operations
// with non-JSON bodies; GitHub's and Figma's are whole (make specs).
func TestBodiesInRealDocuments(t *testing.T) {
	cases := []struct {
		name, path string
		want       map[string]string // operation → kind, for the operations that matter
	}{
		{"Petstore", "testdata/petstore-bodies.yaml", map[string]string{
			"updatePet": "json", "addPet": "json", "placeOrder": "json", "createUser": "json", "updateUser": "json",
			"uploadFile": "binary",
		}},
		{"ReadMe", "testdata/readme-bodies.yaml", map[string]string{
			"createAPI": "multipart", "updateAPI": "multipart", "uploadFont": "multipart", "uploadImage": "multipart", "validateAPI": "multipart",
		}},
		{"GitHub", "../testdata/large/api.github.com.json", map[string]string{
			"markdown/render-raw": "text", "repos/upload-release-asset": "binary",
		}},
		{"Figma", "../testdata/large/figma-openapi.yaml", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, err := os.ReadFile(c.path)
			if err != nil {
				t.Skipf("%s is missing: run `make specs` to fetch it (%v)", c.path, err)
			}
			ops, skipped := plans(t, data)
			doc, _, _, _ := load(data)
			counts := map[string]int{}
			for path, item := range doc.Paths.PathItems.FromOldest() {
				for method, op := range item.GetOperations().FromOldest() {
					if op.RequestBody == nil || op.RequestBody.Content == nil || op.RequestBody.Content.Len() == 0 {
						continue
					}
					id := op.OperationId
					if id == "" {
						id = strings.ToUpper(method) + " " + path
					}
					counts["with a body"]++
					for mt := range op.RequestBody.Content.KeysFromOldest() {
						if base := mediaBase(mt); base == "multipart/form-data" || base == "application/x-www-form-urlencoded" {
							counts["offering form or multipart"]++
							break
						}
					}
					o := ops[id]
					switch {
					case o == nil && strings.HasPrefix(skipped[id], "request body"):
						counts["skipped for the body"]++
					case o == nil:
						counts["skipped for another reason"]++
					case o.body.kind == noBody:
						t.Errorf("%s: got a tool that sends no body, want the body sent or the operation skipped", id)
					default:
						counts["sent as "+kindNames[o.body.kind]]++
					}
				}
			}
			t.Logf("%s: %v", c.name, counts)
			for id, want := range c.want {
				if o := ops[id]; o == nil || kindNames[o.body.kind] != want {
					t.Errorf("%s: got %v (skipped: %q), want the body sent as %s", id, o != nil && o.body.kind != noBody, skipped[id], want)
				}
			}
		})
	}
}

// TestFormerlyDroppedBodies: the six operations of the Petstore and ReadMe
// documents whose bodies the tools used to leave out now send them.
func TestFormerlyDroppedBodies(t *testing.T) {
	srv := newEcho(t)
	creds := func(context.Context, CredentialRequest) (Credential, error) { return Credential{Token: "tok"}, nil }
	spec := func(p string) string {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	petstore := convert(t, spec("testdata/petstore-bodies.yaml"), Options{BaseURL: srv.URL, Credentials: creds})
	readme := convert(t, spec("testdata/readme-bodies.yaml"), Options{BaseURL: srv.URL, Credentials: creds})
	yaml := "openapi: 3.1.0\n"
	cases := []struct {
		api         *API
		tool, input string
		contentType string
		parts       []receivedPart // multipart bodies
		body        string         // others
	}{
		{petstore, "uploadFile", `{"petId": 1, "body": {"data": "` + b64("\x89PNG") + `", "contentType": "image/png"}}`, "image/png", nil, "\x89PNG"},
		{readme, "createAPI", `{"branch": "stable", "schema": {"data": "` + b64(yaml) + `", "filename": "api.yaml"}}`, "multipart/form-data",
			[]receivedPart{{Name: "schema", Filename: "api.yaml", ContentType: "application/octet-stream", Data: []byte(yaml)}}, ""},
		{readme, "updateAPI", `{"branch": "stable", "filename": "api.yaml", "url": "https://example.com/api.yaml", "upload_source": "api"}`, "multipart/form-data",
			[]receivedPart{{Name: "upload_source", Data: []byte("api")}, {Name: "url", Data: []byte("https://example.com/api.yaml")}}, ""},
		{readme, "uploadFont", `{"slot": "heading", "file": {"data": "` + b64("font") + `", "filename": "f.woff2", "contentType": "font/woff2"}}`, "multipart/form-data",
			[]receivedPart{{Name: "file", Filename: "f.woff2", ContentType: "font/woff2", Data: []byte("font")}}, ""},
		{readme, "uploadImage", `{"resize_height": "40", "file": {"data": "` + b64("gif") + `", "filename": "a.gif", "contentType": "image/gif"}}`, "multipart/form-data",
			[]receivedPart{{Name: "file", Filename: "a.gif", ContentType: "image/gif", Data: []byte("gif")}}, ""},
		{readme, "validateAPI", `{"schema": "openapi: 3.1.0"}`, "multipart/form-data",
			[]receivedPart{{Name: "schema", Data: []byte("openapi: 3.1.0")}}, ""},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			got := sent(t, c.api, c.tool, c.input)
			if got.ContentType != c.contentType {
				t.Errorf("got Content-Type %q, want %q", got.ContentType, c.contentType)
			}
			if c.parts != nil && !reflect.DeepEqual(got.Parts, c.parts) {
				t.Errorf("got parts\n%+v\nwant\n%+v", got.Parts, c.parts)
			}
			if c.parts == nil && string(got.Body) != c.body {
				t.Errorf("got body %q, want %q", got.Body, c.body)
			}
		})
	}
}
