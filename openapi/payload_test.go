package openapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// formSpec has an operation for each way a body is written.
const formSpec = `
openapi: 3.0.3
info: {title: Forms, version: "1"}
paths:
  /form:
    post:
      operationId: form
      requestBody:
        required: true
        content:
          application/x-www-form-urlencoded:
            schema:
              type: object
              properties:
                name: {type: string}
                count: {type: integer}
                ok: {type: boolean}
                note: {type: string, nullable: true}
                tags: {type: array, items: {type: string}}
                ids: {type: array, items: {type: integer}}
                filter: {type: object, properties: {color: {type: string}, size: {type: integer}}}
                point: {type: object, properties: {x: {type: integer}, y: {type: integer}}}
                meta: {type: object, properties: {a: {type: integer}}}
              required: [name]
            encoding:
              ids: {explode: false}
              filter: {style: deepObject}
              meta: {contentType: application/json}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
  /form/open:
    post:
      operationId: formOpen
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema: {type: object}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
  /upload:
    post:
      operationId: upload
      requestBody:
        required: true
        content:
          multipart/form-data:
            schema:
              type: object
              properties:
                title: {type: string}
                count: {type: integer}
                flag: {type: boolean}
                file: {type: string, format: binary, description: The picture.}
                attachments: {type: array, items: {type: string, format: binary}}
                tags: {type: array, items: {type: string}}
                meta: {type: object, properties: {a: {type: integer}}}
                csv: {type: string}
                doc: {type: object, properties: {a: {type: string}}}
                logo: {type: string}
              required: [file]
            encoding:
              file:
                contentType: image/png, image/jpeg
                headers:
                  X-Kind: {schema: {type: string, const: photo}}
                  X-Optional: {schema: {type: string}}
              csv: {contentType: text/csv}
              doc: {contentType: application/xml}
              logo: {contentType: image/webp}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
  /upload/optional:
    post:
      operationId: uploadOptional
      requestBody:
        content:
          multipart/form-data:
            schema:
              type: object
              properties:
                file: {type: string, format: binary}
                note: {type: string}
              required: [file]
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
  /raw:
    put:
      operationId: raw
      requestBody:
        required: true
        content:
          application/octet-stream: {schema: {type: string, format: binary}}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
  /raw/image:
    put:
      operationId: rawImage
      requestBody:
        content:
          image/*: {}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
  /text:
    post:
      operationId: text
      requestBody:
        content:
          text/plain: {schema: {type: string}}
          text/x-markdown: {schema: {type: string}}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
`

// formSpec31 has OpenAPI 3.1's ways of declaring files, and untyped
// properties.
const formSpec31 = `
openapi: 3.1.0
info: {title: Forms31, version: "1"}
paths:
  /upload:
    post:
      operationId: upload31
      requestBody:
        content:
          multipart/form-data:
            schema:
              type: object
              properties:
                avatar: {type: string, contentMediaType: image/png}
                signed: {type: string, contentEncoding: base64}
                spec: {description: The document.}
                extra: {}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
`

// received is what the echo server read of a request body, with the
// standard library's own readers.
type received struct {
	ContentType string              `json:"contentType"` // without parameters
	Form        url.Values          `json:"form"`        // r.ParseForm, form-urlencoded bodies
	Parts       []receivedPart      `json:"parts"`       // mime/multipart.Reader, in order
	Values      map[string][]string `json:"values"`      // r.ParseMultipartForm: text fields
	Files       map[string][]string `json:"files"`       // r.ParseMultipartForm: file names by field
	Body        []byte              `json:"body"`        // as sent
}

type receivedPart struct {
	Name, Filename, ContentType string
	Encoding                    string // Content-Transfer-Encoding
	Kind                        string // the X-Kind header
	Data                        []byte
}

// echo is a loopback server that parses each request body the way Go
// servers do and answers with what it read.
type echo struct {
	*httptest.Server
	mu   sync.Mutex
	seen []received
}

func newEcho(t *testing.T) *echo {
	t.Helper()
	e := &echo{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, err := read(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.seen = append(e.seen, got)
		e.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(got)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *echo) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.seen)
}

// read parses a request body with net/http and mime/multipart.
func read(r *http.Request) (received, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return received{}, err
	}
	var got received
	got.Body = body
	if r.Header.Get("Content-Type") == "" {
		return got, nil
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return got, err
	}
	got.ContentType = mt
	again := func() *http.Request {
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(body))
		return r2
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		r2 := again()
		if err := r2.ParseForm(); err != nil {
			return got, err
		}
		got.Form = r2.PostForm
	case "multipart/form-data":
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return got, err
			}
			data, err := io.ReadAll(p)
			if err != nil {
				return got, err
			}
			got.Parts = append(got.Parts, receivedPart{p.FormName(), p.FileName(), p.Header.Get("Content-Type"),
				p.Header.Get("Content-Transfer-Encoding"), p.Header.Get("X-Kind"), data})
		}
		r2 := again()
		if err := r2.ParseMultipartForm(1 << 20); err != nil {
			return got, err
		}
		got.Values, got.Files = r2.MultipartForm.Value, map[string][]string{}
		for name, fhs := range r2.MultipartForm.File {
			for _, fh := range fhs {
				got.Files[name] = append(got.Files[name], fh.Filename)
			}
		}
	}
	return got, nil
}

// sent calls a tool and decodes what the echo server read.
func sent(t *testing.T, api *API, tool, input string) received {
	t.Helper()
	res, err := call(t, api, tool, input)
	if err != nil {
		t.Fatalf("%s(%s): %v", tool, input, err)
	}
	raw, ok := res.(json.RawMessage)
	if !ok {
		t.Fatalf("%s: result %T %v, want the echo's JSON", tool, res, res)
	}
	var got received
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestFormBody(t *testing.T) {
	srv := newEcho(t)
	api := convert(t, formSpec, Options{BaseURL: srv.URL})
	cases := []struct {
		name, tool, input string
		want              url.Values
		raw               string // the body as sent, when it matters
	}{
		{"primitives as strings", "form", `{"name": "Ada Lovelace", "count": 3, "ok": true}`,
			url.Values{"name": {"Ada Lovelace"}, "count": {"3"}, "ok": {"true"}}, "name=Ada%20Lovelace&count=3&ok=true"},
		{"array exploded by default", "form", `{"name": "n", "tags": ["a", "b&c"]}`,
			url.Values{"name": {"n"}, "tags": {"a", "b&c"}}, "name=n&tags=a&tags=b%26c"},
		{"array with explode false", "form", `{"name": "n", "ids": [1, 2, 3]}`,
			url.Values{"name": {"n"}, "ids": {"1,2,3"}}, "name=n&ids=1,2,3"},
		{"deepObject", "form", `{"name": "n", "filter": {"size": 2, "color": "red"}}`,
			url.Values{"name": {"n"}, "filter[color]": {"red"}, "filter[size]": {"2"}}, ""},
		{"object exploded by form", "form", `{"name": "n", "point": {"x": 1, "y": 2}}`,
			url.Values{"name": {"n"}, "x": {"1"}, "y": {"2"}}, ""},
		{"JSON contentType", "form", `{"name": "n", "meta": {"a": 1}}`,
			url.Values{"name": {"n"}, "meta": {`{"a":1}`}}, ""},
		{"null left out", "form", `{"name": "n", "note": null}`,
			url.Values{"name": {"n"}}, "name=n"},
		{"free-form object", "formOpen", `{"body": {"b": "2", "a": [1, 2]}}`,
			url.Values{"a": {"1", "2"}, "b": {"2"}}, "a=1&a=2&b=2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := sent(t, api, c.tool, c.input)
			if got.ContentType != "application/x-www-form-urlencoded" {
				t.Errorf("got Content-Type %q, want application/x-www-form-urlencoded", got.ContentType)
			}
			if !reflect.DeepEqual(got.Form, c.want) {
				t.Errorf("got fields %v, want %v", got.Form, c.want)
			}
			if c.raw != "" && string(got.Body) != c.raw {
				t.Errorf("got body %q, want %q", got.Body, c.raw)
			}
		})
	}
	t.Run("optional body left out", func(t *testing.T) {
		if got := sent(t, api, "formOpen", `{}`); got.ContentType != "" || len(got.Body) != 0 {
			t.Errorf("got %q (%s), want no body", got.Body, got.ContentType)
		}
	})
}

func TestMultipartBody(t *testing.T) {
	srv := newEcho(t)
	api := convert(t, formSpec, Options{BaseURL: srv.URL})
	png := "\x89PNG\r\n\x1a\n\x00\xff binary"
	cases := []struct {
		name, tool, input string
		want              []receivedPart
		files             map[string][]string // as ParseMultipartForm sees them
		values            map[string][]string
	}{
		{"one file", "upload", `{"file": {"data": "` + b64(png) + `", "filename": "cat.png"}}`,
			[]receivedPart{{Name: "file", Filename: "cat.png", ContentType: "image/png", Kind: "photo", Data: []byte(png)}},
			map[string][]string{"file": {"cat.png"}}, map[string][]string{}},
		{"file defaults and a content type", "upload", `{"file": {"data": "` + base64.RawURLEncoding.EncodeToString([]byte(png)) + `", "contentType": "image/jpeg"}}`,
			[]receivedPart{{Name: "file", Filename: "file", ContentType: "image/jpeg", Kind: "photo", Data: []byte(png)}},
			map[string][]string{"file": {"file"}}, map[string][]string{}},
		{"text fields", "upload", `{"title": "Hi \"there\"", "count": 2, "flag": false, "csv": "a,b", "file": {"data": ""}}`,
			[]receivedPart{
				{Name: "title", Data: []byte(`Hi "there"`)},
				{Name: "count", Data: []byte("2")},
				{Name: "flag", Data: []byte("false")},
				{Name: "file", Filename: "file", ContentType: "image/png", Kind: "photo", Data: []byte{}},
				{Name: "csv", ContentType: "text/csv", Data: []byte("a,b")},
			},
			map[string][]string{"file": {"file"}},
			map[string][]string{"title": {`Hi "there"`}, "count": {"2"}, "flag": {"false"}, "csv": {"a,b"}}},
		{"several files", "upload", `{"file": {"data": "` + b64("1") + `"}, "attachments": [{"data": "` + b64("a") + `", "filename": "a.txt", "contentType": "text/plain"}, {"data": "` + b64("b") + `", "filename": "b.bin"}]}`,
			[]receivedPart{
				{Name: "file", Filename: "file", ContentType: "image/png", Kind: "photo", Data: []byte("1")},
				{Name: "attachments", Filename: "a.txt", ContentType: "text/plain", Data: []byte("a")},
				{Name: "attachments", Filename: "b.bin", ContentType: "application/octet-stream", Data: []byte("b")},
			},
			map[string][]string{"file": {"file"}, "attachments": {"a.txt", "b.bin"}}, map[string][]string{}},
		{"JSON part and repeated text parts", "upload", `{"file": {"data": ""}, "tags": ["x", "y"], "meta": {"a": 1, "b": "<&>"}}`,
			[]receivedPart{
				{Name: "file", Filename: "file", ContentType: "image/png", Kind: "photo", Data: []byte{}},
				{Name: "tags", Data: []byte("x")},
				{Name: "tags", Data: []byte("y")},
				{Name: "meta", ContentType: "application/json", Data: []byte(`{"a":1,"b":"<&>"}`)},
			},
			map[string][]string{"file": {"file"}}, map[string][]string{"tags": {"x", "y"}, "meta": {`{"a":1,"b":"<&>"}`}}},
		{"types the encoding declares", "upload", `{"file": {"data": ""}, "doc": "<doc><a>1</a></doc>", "logo": {"data": "` + b64("RIFF") + `"}}`,
			[]receivedPart{
				{Name: "file", Filename: "file", ContentType: "image/png", Kind: "photo", Data: []byte{}},
				{Name: "doc", ContentType: "application/xml", Data: []byte("<doc><a>1</a></doc>")},
				{Name: "logo", Filename: "logo", ContentType: "image/webp", Data: []byte("RIFF")},
			},
			map[string][]string{"file": {"file"}, "logo": {"logo"}}, map[string][]string{"doc": {"<doc><a>1</a></doc>"}}},
		{"whole body", "uploadOptional", `{"body": {"note": "n", "file": {"data": "` + b64("x") + `"}}}`,
			[]receivedPart{{Name: "file", Filename: "file", ContentType: "application/octet-stream", Data: []byte("x")}, {Name: "note", Data: []byte("n")}},
			map[string][]string{"file": {"file"}}, map[string][]string{"note": {"n"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := sent(t, api, c.tool, c.input)
			if got.ContentType != "multipart/form-data" {
				t.Errorf("got Content-Type %q, want multipart/form-data", got.ContentType)
			}
			if !reflect.DeepEqual(got.Parts, c.want) {
				t.Errorf("got parts\n%+v\nwant\n%+v", got.Parts, c.want)
			}
			if !reflect.DeepEqual(got.Files, c.files) || !reflect.DeepEqual(got.Values, c.values) {
				t.Errorf("ParseMultipartForm got files %v, values %v; want %v, %v", got.Files, got.Values, c.files, c.values)
			}
		})
	}
	t.Run("optional body left out", func(t *testing.T) {
		if got := sent(t, api, "uploadOptional", `{}`); got.ContentType != "" || len(got.Body) != 0 {
			t.Errorf("got %q (%s), want no body", got.Body, got.ContentType)
		}
	})
}

// TestMultipartFiles31: OpenAPI 3.1's contentMediaType and contentEncoding
// make files, and an untyped property takes text or a file.
func TestMultipartFiles31(t *testing.T) {
	srv := newEcho(t)
	api := convert(t, formSpec31, Options{BaseURL: srv.URL})
	cases := []struct {
		name, input string
		want        []receivedPart
	}{
		{"contentMediaType", `{"avatar": {"data": "` + b64("\x00img") + `"}}`,
			[]receivedPart{{Name: "avatar", Filename: "avatar", ContentType: "image/png", Data: []byte("\x00img")}}},
		{"contentEncoding base64", `{"signed": {"data": "` + b64("\x01\x02") + `", "filename": "s.bin"}}`,
			[]receivedPart{{Name: "signed", Filename: "s.bin", ContentType: "application/octet-stream", Encoding: "base64", Data: []byte(b64("\x01\x02"))}}},
		{"untyped as text", `{"spec": "openapi: 3.1.0", "extra": "x"}`,
			[]receivedPart{{Name: "spec", Data: []byte("openapi: 3.1.0")}, {Name: "extra", Data: []byte("x")}}},
		{"untyped as a file", `{"spec": {"data": "` + b64("{}") + `", "filename": "api.json", "contentType": "application/json"}}`,
			[]receivedPart{{Name: "spec", Filename: "api.json", ContentType: "application/json", Data: []byte("{}")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := sent(t, api, "upload31", c.input); !reflect.DeepEqual(got.Parts, c.want) {
				t.Errorf("got parts\n%+v\nwant\n%+v", got.Parts, c.want)
			}
		})
	}
}

func TestRawBodies(t *testing.T) {
	srv := newEcho(t)
	api := convert(t, formSpec, Options{BaseURL: srv.URL})
	bin := "\x00\x01\xfe\xff"
	cases := []struct {
		name, tool, input string
		contentType       string
		body              string
	}{
		{"bytes with the declared type", "raw", `{"body": {"data": "` + b64(bin) + `"}}`, "application/octet-stream", bin},
		{"bytes with a given type", "raw", `{"body": {"data": "` + b64(bin) + `", "contentType": "application/zip"}}`, "application/zip", bin},
		{"wildcard type named by the input", "rawImage", `{"body": {"data": "` + b64(bin) + `", "contentType": "image/webp"}}`, "image/webp", bin},
		{"text as it is", "text", `{"body": "# Hello\n"}`, "text/plain", "# Hello\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := sent(t, api, c.tool, c.input)
			if got.ContentType != c.contentType || string(got.Body) != c.body {
				t.Errorf("got %q as %s, want %q as %s", got.Body, got.ContentType, c.body, c.contentType)
			}
		})
	}
}

// TestBadFileInput: a file the tool cannot read fails the call with an
// error telling the shape, and nothing is sent.
func TestBadFileInput(t *testing.T) {
	srv := newEcho(t)
	api := convert(t, formSpec, Options{BaseURL: srv.URL})
	cases := []struct {
		name, tool, input, want string
	}{
		{"a string", "upload", `{"file": "aGVsbG8="}`, `invalid input property "file": a file is an object { data: "<base64>", filename?: "...", contentType?: "..." }, not a string`},
		{"not base64", "upload", `{"file": {"data": "not base64!"}}`, `invalid input property "file": "data" is not base64`},
		{"no data", "upload", `{"file": {"filename": "a"}}`, `"data", its bytes in base64, is missing`},
		{"unknown member", "upload", `{"file": {"data": "", "name": "a"}}`, `"name" is not one of its properties`},
		{"line break in the filename", "upload", `{"file": {"data": "", "filename": "a\r\nX-Evil: 1"}}`, `"filename" must be a string without control characters`},
		{"bad content type", "upload", `{"file": {"data": "", "contentType": "image/*"}}`, `"contentType" must be a media type`},
		{"in a whole body", "uploadOptional", `{"body": {"file": 1}}`, `invalid input property "body.file": a file is an object { data: "<base64>", filename?: "...", contentType?: "..." }, not a number`},
		{"one of several files", "upload", `{"file": {"data": ""}, "attachments": [{"data": ""}, "x"]}`, `invalid input property "attachments[1]": a file is an object`},
		{"a raw body as a string", "raw", `{"body": "AAEC"}`, `invalid input property "body": a file is an object { data: "<base64>", contentType?: "..." }, not a string`},
		{"a filename for a raw body", "raw", `{"body": {"data": "", "filename": "x"}}`, `"filename" is not one of its properties`},
		{"a wildcard type not named", "rawImage", `{"body": {"data": ""}}`, `contentType is required, since the API takes image/*`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := srv.count()
			_, err := call(t, api, c.tool, c.input)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got error %v, want one containing %q", err, c.want)
			}
			if n := srv.count() - before; n != 0 {
				t.Errorf("got %d requests sent, want none", n)
			}
		})
	}
	// Through the runtime, the input schema refuses a string before the
	// tool runs.
	t.Run("validated", func(t *testing.T) {
		res, _ := execute(t, api, 10*time.Second, `return await tools.api.upload({ file: "aGVsbG8=" })`)
		if res.OK || res.Error.Kind != "InvalidToolInput" || !strings.Contains(res.Error.Message, "/properties/file") {
			t.Errorf("got %+v, want InvalidToolInput naming /properties/file", res.Error)
		}
		if srv.count() != 0 {
			t.Errorf("got %d requests sent, want none", srv.count())
		}
	})
}

// TestFileSignature: the model sees a file's shape in the signature.
func TestFileSignature(t *testing.T) {
	api := convert(t, formSpec, Options{})
	rt := mountable(t, api)
	var sig string
	for _, e := range rt.Catalog() {
		if strings.HasSuffix(strings.Join(e.Segments, "."), ".upload") {
			sig = e.Signature
		}
	}
	for _, want := range []string{
		"file: {", "data: string;", "filename?: string;", "contentType?: string;", "base64-encoded",
		"attachments?: Array<{", "the API takes image/png, image/jpeg (default image/png)",
	} {
		if !strings.Contains(sig, want) {
			t.Errorf("got signature\n%s\nwant it to hold %q", sig, want)
		}
	}
}

// plans converts a document as FromSpec does and returns each converted
// operation's plan by operation id, and each skipped operation's reason.
func plans(t testing.TB, spec []byte) (map[string]*operation, map[string]string) {
	t.Helper()
	doc, root, oas30, err := load(spec)
	if err != nil {
		t.Fatal(err)
	}
	b := newBuilder(doc, newConverter(root, oas30), Options{})
	ops, skipped := map[string]*operation{}, map[string]string{}
	for path, item := range doc.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			method = strings.ToUpper(method)
			id := op.OperationId
			if id == "" {
				id = method + " " + path
			}
			o, reason := b.operation(id, method, path, item, op)
			if reason != "" {
				skipped[id] = reason
				continue
			}
			ops[id] = o
		}
	}
	return ops, skipped
}

var kindNames = map[bodyKind]string{noBody: "none", jsonBody: "json", formBody: "form", multipartBody: "multipart", textBody: "text", binaryBody: "binary"}

func TestBodyMediaChoice(t *testing.T) {
	ops, skipped := plans(t, []byte(`
openapi: 3.0.3
info: {title: Choice, version: "1"}
paths:
  /all:
    post:
      operationId: all
      requestBody:
        required: true
        content:
          application/xml: {schema: {type: object}}
          multipart/form-data: {schema: {type: object}}
          application/x-www-form-urlencoded: {schema: {type: object}}
          application/merge-patch+json: {schema: {type: object}}
      responses: {"204": {description: ok}}
  /noJSON:
    post:
      operationId: noJSON
      requestBody:
        content:
          multipart/form-data: {schema: {type: object}}
          application/x-www-form-urlencoded: {schema: {type: object}}
      responses: {"204": {description: ok}}
  /mixedFirst:
    post:
      operationId: mixedFirst
      requestBody:
        content:
          multipart/mixed: {schema: {type: object}}
          multipart/form-data: {schema: {type: object}}
      responses: {"204": {description: ok}}
  /textOrBinary:
    post:
      operationId: textOrBinary
      requestBody:
        content:
          application/octet-stream: {}
          text/csv: {schema: {type: string}}
      responses: {"204": {description: ok}}
  /xmlOnly:
    post:
      operationId: xmlOnly
      requestBody:
        content:
          application/xml: {schema: {type: object, properties: {a: {type: string}}}}
      responses: {"204": {description: ok}}
  /graphql:
    post:
      operationId: graphql
      requestBody:
        content:
          application/graphql: {schema: {type: string}}
      responses: {"204": {description: ok}}
  /pdf:
    post:
      operationId: pdf
      requestBody:
        content:
          application/pdf: {}
      responses: {"204": {description: ok}}
  /pipesOrMultipart:
    post:
      operationId: pipesOrMultipart
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema: {type: object, properties: {ids: {type: array, items: {type: integer}}}}
            encoding: {ids: {style: pipeDelimited}}
          multipart/form-data:
            schema: {type: object, properties: {ids: {type: array, items: {type: integer}}}}
      responses: {"204": {description: ok}}
  /mixedOnly:
    post:
      operationId: mixedOnly
      requestBody:
        content:
          multipart/mixed: {schema: {type: object}}
      responses: {"204": {description: ok}}
  /formString:
    post:
      operationId: formString
      requestBody:
        required: true
        content:
          application/x-www-form-urlencoded: {schema: {type: string}}
      responses: {"204": {description: ok}}
  /pipes:
    post:
      operationId: pipes
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema: {type: object, properties: {ids: {type: array, items: {type: integer}}}}
            encoding: {ids: {style: pipeDelimited}}
      responses: {"204": {description: ok}}
  /partHeader:
    post:
      operationId: partHeader
      requestBody:
        content:
          multipart/form-data:
            schema: {type: object, properties: {file: {type: string, format: binary}}}
            encoding:
              file:
                headers:
                  X-Signature: {required: true, schema: {type: string}}
      responses: {"204": {description: ok}}
`))
	wantKind := map[string]string{
		"all": "json application/merge-patch+json", "noJSON": "form application/x-www-form-urlencoded",
		"mixedFirst": "multipart multipart/form-data", "textOrBinary": "text text/csv", "xmlOnly": "text application/xml",
		"graphql": "text application/graphql", "pdf": "binary application/pdf", "pipesOrMultipart": "multipart multipart/form-data",
	}
	for id, want := range wantKind {
		t.Run(id, func(t *testing.T) {
			o := ops[id]
			if o == nil {
				t.Fatalf("got %s skipped (%s), want %s", id, skipped[id], want)
			}
			if got := kindNames[o.body.kind] + " " + o.body.mediaType; got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
	wantSkip := map[string]string{
		"mixedOnly":  "request body media type multipart/mixed is not supported",
		"formString": "request body application/x-www-form-urlencoded: the schema is not an object, so there are no fields to send",
		"pipes":      `request body application/x-www-form-urlencoded: property "ids" uses style "pipeDelimited", which is not supported`,
		"partHeader": `request body multipart/form-data: part "file" needs header "X-Signature", whose value the input cannot give`,
	}
	for id, want := range wantSkip {
		t.Run(id, func(t *testing.T) {
			if got := skipped[id]; got != want {
				t.Errorf("got reason %q, want %q", got, want)
			}
		})
	}
	if len(ops)+len(skipped) != len(wantKind)+len(wantSkip) {
		t.Errorf("got %d converted and %d skipped, want %d and %d", len(ops), len(skipped), len(wantKind), len(wantSkip))
	}
}
