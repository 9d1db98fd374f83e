package demo

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
)

func run(t *testing.T, tools codemode.Tools, program string) codemode.Result {
	t.Helper()
	rt, err := codemode.New(codemode.Options{Tools: tools, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	res, err := rt.Execute(context.Background(), program)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestStartRunsProgram runs the demo program against the HTTP-backed tools
// and the in-memory ones: same value, same logs.
func TestStartRunsProgram(t *testing.T) {
	tools, stop, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	got := run(t, tools, Program)
	want := run(t, Tools(), Program)
	if !got.OK {
		t.Fatalf("run failed: %+v", got.Error)
	}
	if string(got.Value) != string(want.Value) || strings.Join(got.Logs, "\n") != strings.Join(want.Logs, "\n") {
		t.Fatalf("HTTP tools gave %s %q, in-memory tools %s %q", got.Value, got.Logs, want.Value, want.Logs)
	}
	if len(got.ToolCalls) != 4 {
		t.Fatalf("tool calls = %v, want 4", got.ToolCalls)
	}
}

func TestStartToolsBehave(t *testing.T) {
	tools, stop, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	res := run(t, tools, `
const made = await tools.shop.createOrder({ customerId: "c-2", totalCents: 500 })
const open = await tools.shop.listOrders({ status: "open" })
let missing
try { await tools.shop.getCustomer({ id: "c-9" }) } catch (e) { missing = e.message }
return { made, count: open.orders.length, missing }`)
	if !res.OK {
		t.Fatalf("run failed: %+v", res.Error)
	}
	var v struct {
		Made    order  `json:"made"`
		Count   int    `json:"count"`
		Missing string `json:"missing"`
	}
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatal(err)
	}
	if v.Made.ID != "o-1007" || v.Made.Status != "open" || v.Count != 5 {
		t.Fatalf("unexpected result %s", res.Value)
	}
	if !strings.Contains(v.Missing, `HTTP 404: no customer "c-9"`) {
		t.Fatalf("missing customer message = %q", v.Missing)
	}
}

// TestShopNeedsToken: the server refuses a request without the token, so
// the tools' success above shows the host-side credential at work.
func TestShopNeedsToken(t *testing.T) {
	s, err := startShop("127.0.0.1:0", "a-token-for-the-test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + s.token} {
		req, _ := http.NewRequest("GET", s.url+"/orders", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusUnauthorized
		if auth == "Bearer "+s.token {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("Authorization %q: status %d, want %d", auth, resp.StatusCode, want)
		}
	}
}

func TestStartStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tools, stop, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	cancel()
	time.Sleep(50 * time.Millisecond)
	res := run(t, tools, `return await tools.shop.listOrders({})`)
	if res.OK || !strings.Contains(res.Error.Message, "failed") {
		t.Fatalf("after the context ended the call should fail, got %+v", res)
	}
}
