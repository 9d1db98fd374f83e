package openapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const clientSpec = `
openapi: 3.0.3
info: {title: Client, version: "1"}
security: [{key: []}, {bearer: []}]
paths:
  /thing/{id}:
    get:
      operationId: getThing
      parameters: [{name: id, in: path, required: true, schema: {type: integer}}]
      responses:
        "200":
          description: ok
          content:
            application/json: {schema: {type: object, properties: {id: {type: integer}}}}
            text/plain: {schema: {type: string}}
components:
  securitySchemes:
    key: {type: apiKey, in: query, name: key}
    bearer: {type: http, scheme: bearer}
`

const (
	queryKey = "QK-very-secret-123"
	token    = "TK-very-secret-456"
)

func secretCreds(scheme string) CredentialFunc {
	return func(_ context.Context, req CredentialRequest) (Credential, error) {
		if req.Scheme == scheme || scheme == "" {
			return Credential{Key: queryKey, Token: token}, nil
		}
		return Credential{}, nil
	}
}

func TestResponses(t *testing.T) {
	var respond atomic.Value
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		respond.Load().(http.HandlerFunc)(w, r)
	})
	api := convert(t, clientSpec, Options{BaseURL: srv.URL, Credentials: secretCreds("key"), MaxResponseBytes: 1000})
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    string // the JSON of the value, or the error message
		isErr   bool
	}{
		{"json", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			fmt.Fprint(w, `{"id": 12345678901234567890}`)
		}, `{"id": 12345678901234567890}`, false},
		{"text", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "hello\nworld")
		}, `hello
world`, false},
		{"no content", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }, `<nil>`, false},
		{"echoed secret", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"url": %q}`, r.URL.String())
		}, `{"url": "/thing/1?key=[REDACTED]"}`, false},
		{"binary", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte{0x89, 'P', 'N', 'G', 0, 0xff})
		}, "the response is binary (image/png, 6 bytes), which a tool cannot return", true},
		{"404 json message", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			fmt.Fprint(w, `{"message": "Not\u0000 Found:\n thing 1", "documentation_url": "https://docs"}`)
		}, "HTTP 404: Not Found: thing 1", true},
		{"422 nested error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(422)
			fmt.Fprint(w, `{"error": {"code": 7, "message": "bad id"}}`)
		}, "HTTP 422: bad id", true},
		{"500 long text with secret", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			fmt.Fprint(w, "\x1b[31mboom "+queryKey+" "+strings.Repeat("x", 500))
		}, "HTTP 500: [31mboom [REDACTED] " + strings.Repeat("x", 300-len("[31mboom [REDACTED] ")) + "…", true},
		{"503 empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }, "HTTP 503: Service Unavailable", true},
		{"big error body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(502)
			fmt.Fprint(w, "upstream down "+strings.Repeat("y", 5000))
		}, "HTTP 502: upstream down " + strings.Repeat("y", 300-len("upstream down ")) + "…", true},
		{"oversized by length", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `"%s"`, strings.Repeat("a", 2000))
		}, "the response is too large (2002 bytes; the limit is 1000)", true},
		{"oversized chunked", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			for i := 0; i < 30; i++ {
				fmt.Fprint(w, strings.Repeat(" ", 100))
				w.(http.Flusher).Flush()
			}
		}, "the response is too large (more than 1000 bytes)", true},
	}
	for _, c := range cases {
		respond.Store(c.handler)
		v, err := call(t, api, "getThing", `{"id": 1}`)
		switch {
		case c.isErr && err == nil:
			t.Errorf("%s: no error, value %v", c.name, v)
		case c.isErr && err.Error() != c.want:
			t.Errorf("%s: error %q, want %q", c.name, err, c.want)
		case !c.isErr && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.isErr && fmt.Sprintf("%s", v) != c.want && fmt.Sprint(v) != c.want:
			t.Errorf("%s: value %s, want %s", c.name, v, c.want)
		}
	}
	// The errors above reach the program as they are.
	respond.Store(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) }))
	res, _ := execute(t, api, 5*time.Second, `return await tools.api.getThing({ id: 1 })`)
	if res.OK || res.Error.Kind != "ToolFailure" || !strings.Contains(res.Error.Message, "HTTP 404: Not Found") {
		t.Fatalf("404 through the runtime: %+v", res.Error)
	}
}

// TestRedirectStripsCredentials: a redirect to another origin carries
// neither the Authorization header, the API-key header nor the query key;
// one to the same origin keeps them.
func TestRedirectStripsCredentials(t *testing.T) {
	const spec = `
openapi: 3.0.3
info: {title: Redirect, version: "1"}
security: [{bearer: [], header: [], query: []}]
paths:
  /start: {get: {operationId: start, parameters: [{name: to, in: query, schema: {type: string}}], responses: {"200": {description: ok}}}}
components:
  securitySchemes:
    bearer: {type: http, scheme: bearer}
    header: {type: apiKey, in: header, name: X-Key}
    query: {type: apiKey, in: query, name: key}
`
	other := newRecorder(t, nil)
	origin := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("to") {
		case "other":
			// Echo the query into Location, as many servers do.
			http.Redirect(w, r, other.URL+"/landed?"+r.URL.RawQuery, http.StatusFound)
		case "same":
			http.Redirect(w, r, "/start?to=done&"+r.URL.RawQuery, http.StatusTemporaryRedirect)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `"done"`)
		}
	})
	api := convert(t, spec, Options{BaseURL: origin.URL, Credentials: secretCreds("")})

	// Both servers are on 127.0.0.1: only the port makes the origins
	// differ, which Go's own redirect policy does not treat as a new host.
	if _, err := call(t, api, "start", `{"to": "other"}`); err != nil {
		t.Fatal(err)
	}
	got := other.last(t)
	if got.Header.Get("Authorization") != "" || got.Header.Get("X-Key") != "" || got.Header.Get("Referer") != "" ||
		strings.Contains(got.RawQuery, queryKey) || strings.Contains(got.RawQuery, "key=") {
		t.Fatalf("credentials followed the redirect to another origin: %v ?%s", got.Header, got.RawQuery)
	}
	for name, vs := range got.Header {
		for _, v := range vs {
			if strings.Contains(v, queryKey) || strings.Contains(v, token) {
				t.Errorf("header %s carries a secret after the cross-origin redirect", name)
			}
		}
	}
	if got.RawQuery != "to=other" {
		t.Errorf("other query parameters lost: %q", got.RawQuery)
	}

	if _, err := call(t, api, "start", `{"to": "same"}`); err != nil {
		t.Fatal(err)
	}
	got = origin.last(t)
	if got.Header.Get("Authorization") != "Bearer "+token || got.Header.Get("X-Key") != queryKey || !strings.Contains(got.RawQuery, "key="+queryKey) {
		t.Fatalf("credentials dropped on a same-origin redirect: %v ?%s", got.Header, got.RawQuery)
	}

}

// TestHostClientKept: a host's client is used but not modified, and its
// own CheckRedirect still runs.
func TestHostClientKept(t *testing.T) {
	other := newRecorder(t, nil)
	origin := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/x", http.StatusFound)
	})
	var seen atomic.Int32
	hc := &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
		seen.Add(1)
		if req.Header.Get("Authorization") != "" {
			return fmt.Errorf("credential leaked to the host's CheckRedirect")
		}
		return nil
	}}
	before := fmt.Sprintf("%p", hc.CheckRedirect)
	api := convert(t, clientSpec, Options{BaseURL: origin.URL, HTTPClient: hc, Credentials: secretCreds("bearer")})
	if _, err := call(t, api, "getThing", `{"id": 1}`); err != nil {
		t.Fatal(err)
	}
	if seen.Load() != 1 || fmt.Sprintf("%p", hc.CheckRedirect) != before {
		t.Fatalf("host CheckRedirect calls %d; changed %v", seen.Load(), fmt.Sprintf("%p", hc.CheckRedirect) != before)
	}
	if other.last(t).Header.Get("Authorization") != "" {
		t.Fatal("Authorization followed the redirect")
	}
}

// TestTimeoutCancelsRequest: the run's deadline cancels the in-flight
// request, and the server sees its request context end.
func TestTimeoutCancelsRequest(t *testing.T) {
	cancelled := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	api := convert(t, clientSpec, Options{BaseURL: srv.URL, Credentials: secretCreds("key")})
	start := time.Now()
	res, _ := execute(t, api, 300*time.Millisecond, `return await tools.api.getThing({ id: 1 })`)
	if res.OK || res.Error.Kind != "TimeoutExceeded" {
		t.Fatalf("result %+v", res.Error)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's request context was not cancelled")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

// TestNetworkErrorRedacted: a failed connection is reported without the
// query key, to the program and to the host.
func TestNetworkErrorRedacted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	api := convert(t, clientSpec, Options{BaseURL: "http://" + addr + "/v1", Credentials: secretCreds("key")})
	res, errs := execute(t, api, 5*time.Second, `try { await tools.api.getThing({ id: 1 }) } catch (e) { return e.message }`)
	msg := string(res.Value)
	if !res.OK || !strings.Contains(msg, "GET http://"+addr+"/v1/thing/1 failed") || strings.Contains(msg, queryKey) || strings.Contains(msg, "key=") {
		t.Fatalf("message %s", msg)
	}
	for _, e := range errs {
		if strings.Contains(e.Error(), queryKey) {
			t.Fatalf("host error carries the key: %v", e)
		}
	}
}

const serverSpec = `
openapi: 3.0.3
info: {title: Servers, version: "1"}
servers:
  - url: "{scheme}://{host}/api/{version}"
    variables:
      scheme: {default: http}
      host: {default: HOST}
      version: {default: v2, enum: [v1, v2]}
paths:
  /doc: {get: {operationId: doc, responses: {"200": {description: ok}}}}
  /path:
    servers: [{url: "http://HOST/path-level"}]
    get: {operationId: pathLevel, responses: {"200": {description: ok}}}
    post:
      operationId: opLevel
      servers: [{url: "http://HOST/op-level/"}]
      responses: {"200": {description: ok}}
  /relative:
    get:
      operationId: relative
      servers: [{url: /relative/base}]
      responses: {"200": {description: ok}}
`

func TestServers(t *testing.T) {
	srv := newRecorder(t, nil)
	host := strings.TrimPrefix(srv.URL, "http://")
	api := convert(t, strings.ReplaceAll(serverSpec, "HOST", host), Options{})
	for tool, want := range map[string]string{"doc": "/api/v2/doc", "pathLevel": "/path-level/path", "opLevel": "/op-level/path"} {
		if _, err := call(t, api, tool, `{}`); err != nil {
			t.Errorf("%s: %v", tool, err)
			continue
		}
		if got := srv.last(t).Path; got != want {
			t.Errorf("%s went to %s, want %s", tool, got, want)
		}
	}
	_, err := call(t, api, "relative", `{}`)
	if err == nil || !strings.Contains(err.Error(), `server URL "/relative/base" is not an absolute http(s) URL; the host has to set openapi.Options.BaseURL`) {
		t.Fatalf("relative server: %v", err)
	}
	// BaseURL overrides them all, keeping its own path.
	api = convert(t, serverSpec, Options{BaseURL: srv.URL + "/override/", Headers: http.Header{"User-Agent": {"codemode-test"}}})
	for _, tool := range []string{"doc", "opLevel", "relative"} {
		if _, err := call(t, api, tool, `{}`); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if got := srv.last(t); !strings.HasPrefix(got.Path, "/override/") || got.Header.Get("User-Agent") != "codemode-test" {
			t.Errorf("%s went to %s with User-Agent %q", tool, got.Path, got.Header.Get("User-Agent"))
		}
	}
	// No servers at all.
	api = convert(t, `{"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": {"/x": {"get": {"responses": {"200": {"description": "ok"}}}}}}`, Options{})
	if _, err := call(t, api, "getX", `{}`); err == nil || !strings.Contains(err.Error(), "names no server") {
		t.Fatalf("no server: %v", err)
	}
}

func TestBadBaseURL(t *testing.T) {
	for _, base := range []string{"/relative", "ftp://host/", "http://", "::"} {
		if _, err := FromSpec([]byte(serverSpec), Options{BaseURL: base}); err == nil || !strings.Contains(err.Error(), "BaseURL") {
			t.Errorf("BaseURL %q: err %v", base, err)
		}
	}
}

// TestStaticHeaderSecrets: an API key the host put in Options.Headers is
// redacted and does not follow a cross-origin redirect; other static
// headers do.
func TestStaticHeaderSecrets(t *testing.T) {
	other := newRecorder(t, nil)
	origin := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("id") == "" && r.URL.Path == "/thing/1" {
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
			return
		}
		w.WriteHeader(400)
		fmt.Fprintf(w, "bad key %s", r.Header.Get("X-Api-Key"))
	})
	api := convert(t, strings.Replace(clientSpec, "security: [{key: []}, {bearer: []}]", "", 1), Options{
		BaseURL: origin.URL,
		Headers: http.Header{"X-Api-Key": {"static-secret-1"}, "User-Agent": {"ua-1"}},
	})
	if _, err := call(t, api, "getThing", `{"id": 1}`); err != nil {
		t.Fatal(err)
	}
	got := other.last(t)
	if got.Header.Get("X-Api-Key") != "" || got.Header.Get("User-Agent") != "ua-1" {
		t.Fatalf("after the redirect: %v", got.Header)
	}
	_, err := call(t, api, "getThing", `{"id": 2}`)
	if err == nil || err.Error() != "HTTP 400: bad key [REDACTED]" {
		t.Fatalf("err = %v", err)
	}
}
