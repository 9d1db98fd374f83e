package openapi

import (
	"reflect"
	"strings"
	"testing"

	"github.com/codemode-go/codemode"
)

func TestToolPath(t *testing.T) {
	cases := []struct {
		id, method, path string
		want             string
	}{
		{"listOrders", "GET", "/orders", "listOrders"},
		{"v2.session.get", "GET", "/x", "v2.session.get"},
		{"repos/get-content", "GET", "/x", "repos.getContent"},
		{"apps/list-installations-for-authenticated-user", "GET", "/x", "apps.listInstallationsForAuthenticatedUser"},
		{"list_orders", "GET", "/x", "listOrders"},
		{"Get User By Id", "GET", "/x", "GetUserById"},
		{"users.then", "GET", "/x", "users.then_"},
		{"2fa/enable", "POST", "/x", "_2fa.enable"},
		{"..//", "GET", "/users/{id}", "getUsersById"},
		{"", "GET", "/users/{id}", "getUsersById"},
		{"", "GET", "/users/{user-id}/posts", "getUsersByUserIdPosts"},
		{"", "DELETE", "/repos/{owner}/{repo}", "deleteReposByOwnerByRepo"},
		{"", "GET", "/", "get"},
		{"", "GET", "/files/{name}.{ext}", "getFilesByNameByExt"},
		{"", "POST", "/v1/chat-completions", "postV1ChatCompletions"},
		{"", "GET", "/a/{b", "getAByB"},
		{"", "GET", "/{", "getBy"},
		{"", "GET", "}/x", "getX"},
		{"café.ünïcode", "GET", "/x", "café.ünïcode"},
		// Characters that do not show as themselves: a hidden one breaks
		// words like any non-letter, a look-alike letter is spelled out.
		{"ref\u200bund", "POST", "/x", "refUnd"},
		{"refund\u202e", "POST", "/x", "refund"},
		{"ｒｅｆｕｎｄ", "POST", "/x", "{U+FF52}{U+FF45}{U+FF46}{U+FF55}{U+FF4E}{U+FF44}"},
		{"\ufb01le", "GET", "/x", "{U+FB01}le"},
		{"", "GET", "/ｆｉｌｅｓ", "get{U+FF26}{U+FF49}{U+FF4C}{U+FF45}{U+FF53}"},
	}
	for _, c := range cases {
		if got := strings.Join(toolPath(c.id, c.method, c.path), "."); got != c.want {
			t.Errorf("toolPath(%q, %s %s) = %q, want %q", c.id, c.method, c.path, got, c.want)
		}
	}
}

func TestUniquePaths(t *testing.T) {
	in := [][]string{
		{"users"},         // a tool where a namespace also lives: renamed
		{"users", "list"}, // namespace users wins
		{"users", "list"}, // duplicate: _2
		{"get"},           //
		{"get"},           // duplicate: _2
		{"get_2"},         // taken by the renamed duplicate: _2 again
		{"users_2", "x"},  // makes users_2 a namespace, so the first tool goes on to users_3
		{"users", "list"}, // third: _3
	}
	want := [][]string{
		{"users_3"},
		{"users", "list"},
		{"users", "list_2"},
		{"get"},
		{"get_2"},
		{"get_2_2"},
		{"users_2", "x"},
		{"users", "list_3"},
	}
	if got := uniquePaths(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("uniquePaths =\n%v\nwant\n%v", got, want)
	}
}

func TestNamespaceFor(t *testing.T) {
	cases := map[string]string{
		"GitHub v3 REST API":             "github",
		"Swagger Petstore":               "petstore",
		"Swagger Petstore - OpenAPI 3.0": "petstore",
		"Figma API":                      "figma",
		"The Stripe API":                 "stripe",
		"Shop":                           "shop",
		"":                               "api",
		"API v2":                         "api",
		"Ünïcode Service":                "ncode",
		"GitHub's official OpenAPI spec": "github",
		"2024 Payments":                  "payments",
	}
	for title, want := range cases {
		if got := namespaceFor(title); got != want {
			t.Errorf("namespaceFor(%q) = %q, want %q", title, got, want)
		}
	}
}

// TestNamingThroughSpec: names, clashes and duplicates in a document.
func TestNamingThroughSpec(t *testing.T) {
	api := convert(t, `
openapi: 3.0.3
info: {title: Naming Test, version: "1"}
paths:
  /a:
    get: {operationId: users, responses: {"200": {description: ok}}}
    post: {operationId: users.create, responses: {"200": {description: ok}}}
  /b:
    get: {operationId: repos/get-content, responses: {"200": {description: ok}}}
    put: {operationId: repos/get-content, responses: {"200": {description: ok}}}
  /c/{id}:
    parameters: [{name: id, in: path, required: true, schema: {type: string}}]
    get: {responses: {"200": {description: ok}}}
`, Options{})
	if api.Namespace != "naming" {
		t.Errorf("namespace = %q", api.Namespace)
	}
	for _, p := range []string{"users_2", "users.create", "repos.getContent", "repos.getContent_2", "getCById"} {
		lookup(t, api.Tools, p)
	}
	if n := countTools(api.Tools); n != 5 {
		t.Fatalf("%d tools, want 5", n)
	}
}

// TestLookAlikeNamesThroughSpec: operations whose ids imitate another's
// with look-alike or hidden characters get names that cannot pass for
// it, and the tree is one New accepts.
func TestLookAlikeNamesThroughSpec(t *testing.T) {
	api := convert(t, `
openapi: 3.0.3
info: {title: Refunds, version: "1"}
paths:
  /a:
    post: {operationId: refund, responses: {"200": {description: ok}}}
  /b:
    post: {operationId: "ｒｅｆｕｎｄ", responses: {"200": {description: ok}}}
  /c:
    post: {operationId: "refund\u200b", responses: {"200": {description: ok}}}
`, Options{})
	for _, p := range []string{"refund", "{U+FF52}{U+FF45}{U+FF46}{U+FF55}{U+FF4E}{U+FF44}", "refund_2"} {
		lookup(t, api.Tools, p)
	}
	rt, err := codemode.New(codemode.Options{Tools: codemode.Tools{api.Namespace: api.Tools}})
	if err != nil {
		t.Fatalf("got %v, want the tree accepted", err)
	}
	rt.Close()
}
