package openapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/openapi"
)

const shopSpec = `
openapi: 3.0.3
info: { title: Shop API, version: "1" }
components:
  securitySchemes:
    token: { type: http, scheme: bearer }
security: [{ token: [] }]
paths:
  /orders/{id}:
    get:
      operationId: getOrder
      summary: Get an order by id.
      parameters:
        - { name: id, in: path, required: true, schema: { type: string } }
      responses:
        "200":
          description: The order.
          content:
            application/json:
              schema: { type: object, properties: { id: { type: string }, total: { type: number } } }
`

// An OpenAPI document as tools: the host holds the credential, the
// program never sees it, and the API is called over HTTP.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"total":42}`, strings.TrimPrefix(r.URL.Path, "/orders/"))
	}))
	defer api.Close()

	shop, err := openapi.FromSpec([]byte(shopSpec), openapi.Options{
		BaseURL: api.URL,
		Credentials: func(context.Context, openapi.CredentialRequest) (openapi.Credential, error) {
			return openapi.Credential{Token: "s3cret"}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	res, _ := codemode.Execute(context.Background(), codemode.Options{Tools: codemode.Tools{shop.Namespace: shop.Tools}}, `
		const orders = await Promise.all(["o-1", "o-22"].map((id) => tools.shop.getOrder({ id })))
		return orders.map((o) => o.id + ": " + o.total)`)
	fmt.Println(shop.Namespace, string(res.Value))
	// Output:
	// shop ["o-1: 42","o-22: 42"]
}
