package demo

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/openapi"
)

// ShopSpec is the OpenAPI 3.1 description of the demo shop.
//
//go:embed shop.yaml
var ShopSpec []byte

// Start serves the demo shop API on a loopback port and returns its tools
// (tools.shop.listOrders, tools.shop.getCustomer, tools.shop.createOrder),
// converted from ShopSpec with openapi.FromSpec. The API requires a bearer
// token made up at start; the tools' credential function supplies it, so
// programs call an authenticated API without ever seeing the token. stop
// shuts the server down; so does the end of ctx.
func Start(ctx context.Context) (tools codemode.Tools, stop func(), err error) {
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return nil, nil, fmt.Errorf("demo: making a token: %w", err)
	}
	s, err := startShop("127.0.0.1:0", hex.EncodeToString(raw))
	if err != nil {
		return nil, nil, err
	}
	api, err := openapi.FromSpec(ShopSpec, openapi.Options{
		BaseURL: s.url,
		Credentials: func(_ context.Context, req openapi.CredentialRequest) (openapi.Credential, error) {
			if req.Scheme == "bearerAuth" {
				return openapi.Credential{Token: s.token}, nil
			}
			return openapi.Credential{}, openapi.ErrNoCredential
		},
	})
	if err != nil {
		s.stop()
		return nil, nil, fmt.Errorf("demo: converting the shop spec: %w", err)
	}
	if len(api.Skipped) > 0 {
		s.stop()
		return nil, nil, fmt.Errorf("demo: the shop spec has unconverted operations: %v", api.Skipped)
	}
	context.AfterFunc(ctx, s.stop)
	return codemode.Tools{api.Namespace: api.Tools}, s.stop, nil
}

// shop is a running demo server.
type shop struct {
	url   string // base URL, http://127.0.0.1:PORT
	token string // the bearer token it accepts
	stop  func()

	mu     sync.Mutex
	orders []order
	nextID int
}

// Serve serves the demo shop API at addr, accepting the bearer token
// given, for programs to reach with --openapi (ShopSpec) and
// --bearer-env: the example of an API a host holds the credential for.
// It returns the API's base URL; stop shuts it down.
func Serve(addr, token string) (url string, stop func(), err error) {
	s, err := startShop(addr, token)
	if err != nil {
		return "", nil, err
	}
	return s.url, s.stop, nil
}

func startShop(addr, token string) (*shop, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("demo: listening: %w", err)
	}
	s := &shop{
		url:    "http://" + ln.Addr().String(),
		token:  token,
		orders: append([]order(nil), orders...),
		nextID: 1007,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", s.listOrders)
	mux.HandleFunc("POST /orders", s.createOrder)
	mux.HandleFunc("GET /customers/{id}", s.getCustomer)
	srv := &http.Server{Handler: s.authorized(mux), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }() // returns ErrServerClosed on stop
	var once sync.Once
	s.stop = func() { once.Do(func() { _ = srv.Close() }) }
	return s, nil
}

// authorized refuses requests without the bearer token.
func (s *shop) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) != 1 {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *shop) listOrders(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	s.mu.Lock()
	out := listOut{Orders: []order{}}
	for _, o := range s.orders {
		if status == "" || o.Status == status {
			out.Orders = append(out.Orders, o)
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *shop) getCustomer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, ok := customers[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": fmt.Sprintf("no customer %q (known: %v)", id, customerIDs())})
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *shop) createOrder(w http.ResponseWriter, r *http.Request) {
	var in struct {
		CustomerID string `json:"customerId"`
		TotalCents int    `json:"totalCents"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&in); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "the body must be {customerId, totalCents}"})
		return
	}
	if _, ok := customers[in.CustomerID]; !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": fmt.Sprintf("no customer %q (known: %v)", in.CustomerID, customerIDs())})
		return
	}
	if in.TotalCents < 1 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "totalCents must be at least 1"})
		return
	}
	s.mu.Lock()
	o := order{ID: fmt.Sprintf("o-%d", s.nextID), CustomerID: in.CustomerID, Status: "open", TotalCents: in.TotalCents}
	s.nextID++
	s.orders = append(s.orders, o)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, o)
}

func customerIDs() []string {
	ids := make([]string, 0, len(customers))
	for id := range customers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a failed write means the client left: nothing to tell it
}
