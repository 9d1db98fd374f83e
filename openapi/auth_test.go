package openapi

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

const authSpec = `
openapi: 3.0.3
info: {title: Auth, version: "1"}
security:
  - bearer: []
paths:
  /bearer: {get: {operationId: bearer, responses: {"200": {description: ok}}}}
  /basic: {get: {operationId: basic, security: [{basic: []}], responses: {"200": {description: ok}}}}
  /header: {get: {operationId: header, security: [{headerKey: []}], responses: {"200": {description: ok}}}}
  /query:
    get:
      operationId: query
      security: [{queryKey: []}]
      parameters: [{name: page, in: query, schema: {type: integer}}]
      responses: {"200": {description: ok}}
  /either: {get: {operationId: either, security: [{headerKey: []}, {basic: []}], responses: {"200": {description: ok}}}}
  /both: {get: {operationId: both, security: [{headerKey: [], queryKey: []}], responses: {"200": {description: ok}}}}
  /optional: {get: {operationId: optional, security: [{bearer: []}, {}], responses: {"200": {description: ok}}}}
  /public: {get: {operationId: public, security: [], responses: {"200": {description: ok}}}}
  /oauth: {get: {operationId: oauth, security: [{oauth: [read, write]}], responses: {"200": {description: ok}}}}
  /cookieOrBearer: {get: {operationId: cookieOrBearer, security: [{cookieKey: []}, {bearer: []}], responses: {"200": {description: ok}}}}
  /cookie: {get: {operationId: cookieOnly, security: [{cookieKey: []}], responses: {"200": {description: ok}}}}
  /digest: {get: {operationId: digest, security: [{digest: []}, {undefinedScheme: []}], responses: {"200": {description: ok}}}}
components:
  securitySchemes:
    bearer: {type: http, scheme: Bearer}
    basic: {type: http, scheme: basic}
    headerKey: {type: apiKey, in: header, name: X-API-Key}
    queryKey: {type: apiKey, in: query, name: api_key}
    cookieKey: {type: apiKey, in: cookie, name: session}
    digest: {type: http, scheme: digest}
    oauth:
      type: oauth2
      flows: {clientCredentials: {tokenUrl: "https://example.test/token", scopes: {read: r, write: w}}}
`

// creds answers from a fixed table and records the requests it saw.
type creds struct {
	mu    sync.Mutex
	have  map[string]Credential
	asked []CredentialRequest
	err   error
}

func (c *creds) fn(_ context.Context, req CredentialRequest) (Credential, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, req)
	if c.err != nil {
		return Credential{}, c.err
	}
	if cr, ok := c.have[req.Scheme]; ok {
		return cr, nil
	}
	return Credential{}, ErrNoCredential
}

func TestAuthKinds(t *testing.T) {
	srv := newRecorder(t, nil)
	c := &creds{have: map[string]Credential{
		"bearer":    {Token: "tok-bearer-123"},
		"basic":     {Username: "ada", Password: "pw-basic-456"},
		"headerKey": {Key: "key-header-789"},
		"queryKey":  {Key: "key query&=0"},
		"oauth":     {Token: "tok-oauth-000"},
	}}
	api := convert(t, authSpec, Options{BaseURL: srv.URL, Credentials: c.fn})
	check := func(tool, input string, want func(r recorded) bool) {
		t.Helper()
		if _, err := call(t, api, tool, input); err != nil {
			t.Errorf("%s: %v", tool, err)
			return
		}
		if r := srv.last(t); !want(r) {
			t.Errorf("%s: request %+v", tool, r)
		}
	}
	check("bearer", `{}`, func(r recorded) bool { return r.Header.Get("Authorization") == "Bearer tok-bearer-123" })
	check("basic", `{}`, func(r recorded) bool {
		req := &http.Request{Header: r.Header}
		u, p, ok := req.BasicAuth()
		return ok && u == "ada" && p == "pw-basic-456"
	})
	check("header", `{}`, func(r recorded) bool {
		return r.Header.Get("X-API-Key") == "key-header-789" && r.Header.Get("Authorization") == ""
	})
	check("query", `{"page": 2}`, func(r recorded) bool { return r.RawQuery == "page=2&api_key=key%20query%26%3D0" })
	check("both", `{}`, func(r recorded) bool {
		return r.Header.Get("X-API-Key") == "key-header-789" && strings.Contains(r.RawQuery, "api_key=")
	})
	check("either", `{}`, func(r recorded) bool { return r.Header.Get("X-API-Key") != "" && r.Header.Get("Authorization") == "" })
	check("optional", `{}`, func(r recorded) bool { return r.Header.Get("Authorization") == "Bearer tok-bearer-123" })
	check("public", `{}`, func(r recorded) bool { return r.Header.Get("Authorization") == "" })
	check("oauth", `{}`, func(r recorded) bool { return r.Header.Get("Authorization") == "Bearer tok-oauth-000" })
	check("cookieOrBearer", `{}`, func(r recorded) bool { return r.Header.Get("Authorization") == "Bearer tok-bearer-123" })

	var oauthReq *CredentialRequest
	for i, r := range c.asked {
		if r.Scheme == "oauth" {
			oauthReq = &c.asked[i]
		}
		if r.Scheme == "queryKey" && (r.Type != "apiKey" || r.In != "query" || r.Name != "api_key" || (r.Operation != "query" && r.Operation != "both")) {
			t.Errorf("apiKey request %+v", r)
		}
	}
	if oauthReq == nil || oauthReq.Type != "bearer" || !reflect.DeepEqual(oauthReq.Scopes, []string{"read", "write"}) {
		t.Errorf("oauth2 request %+v", oauthReq)
	}
	// Nothing about credentials in the input schemas.
	for _, name := range []string{"bearer", "basic", "header", "query"} {
		if s := schemaJSON(t, lookup(t, api.Tools, name)); strings.Contains(strings.ToLower(s), "api_key") || strings.Contains(s, "Authorization") {
			t.Errorf("%s input mentions a credential: %s", name, s)
		}
	}
}

func TestAuthAlternatives(t *testing.T) {
	srv := newRecorder(t, nil)
	// Only basic: "either" falls through to its second alternative.
	c := &creds{have: map[string]Credential{"basic": {Username: "u", Password: "p"}}}
	api := convert(t, authSpec, Options{BaseURL: srv.URL, Credentials: c.fn})
	if _, err := call(t, api, "either", `{}`); err != nil {
		t.Fatal(err)
	}
	if r := srv.last(t); r.Header.Get("X-API-Key") != "" || !strings.HasPrefix(r.Header.Get("Authorization"), "Basic ") {
		t.Fatalf("either sent %v", r.Header)
	}
	// AND: headerKey alone is not enough for "both".
	c.have = map[string]Credential{"headerKey": {Key: "k-1234"}}
	n := srv.count()
	_, err := call(t, api, "both", `{}`)
	if err == nil || !strings.Contains(err.Error(), "no credentials available for both (security schemes: headerKey, queryKey)") {
		t.Fatalf("err = %v", err)
	}
	if srv.count() != n {
		t.Fatal("a request went out without credentials")
	}
	// Anonymous allowed: sent without credentials.
	c.have = nil
	if _, err := call(t, api, "optional", `{}`); err != nil {
		t.Fatal(err)
	}
	if r := srv.last(t); r.Header.Get("Authorization") != "" {
		t.Fatal("anonymous call carried Authorization")
	}
}

func TestAuthThroughRuntime(t *testing.T) {
	srv := newRecorder(t, nil)
	// No CredentialFunc at all: anonymous only.
	api := convert(t, authSpec, Options{BaseURL: srv.URL})
	res, _ := execute(t, api, 5*time.Second, `
try { await tools.api.bearer({}) } catch (e) { return e.message }`)
	if !res.OK || !strings.Contains(string(res.Value), "no credentials available for bearer") {
		t.Fatalf("result %s %+v", res.Value, res.Error)
	}
	if srv.count() != 0 {
		t.Fatal("the request was sent")
	}
}

func TestCredentialErrorIsPrivate(t *testing.T) {
	srv := newRecorder(t, nil)
	c := &creds{err: errors.New("vault at https://vault.internal/?token=hunter22 is down")}
	api := convert(t, authSpec, Options{BaseURL: srv.URL, Credentials: c.fn})
	res, errs := execute(t, api, 5*time.Second, `try { await tools.api.bearer({}) } catch (e) { return e.message }`)
	if !res.OK || strings.Contains(string(res.Value), "hunter22") || !strings.Contains(string(res.Value), `credential lookup failed for security scheme \"bearer\"`) {
		t.Fatalf("program saw %s", res.Value)
	}
	// The host still learns the cause.
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "vault") {
		t.Fatalf("host errors %v", errs)
	}
}

func TestUnsupportedSchemesSkipped(t *testing.T) {
	api := convert(t, authSpec, Options{})
	got := map[string]string{}
	for _, s := range api.Skipped {
		got[s.Operation] = s.Reason
	}
	want := map[string]string{
		"cookieOnly": "no supported security scheme: cookieKey (apiKey in cookie)",
		"digest":     "no supported security scheme: digest (http digest); undefinedScheme is not defined",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("skipped %v, want %v", got, want)
	}
}
