package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPREPL: with --repl, a session's declarations live on from one
// execute to the next, calls in one session run in order, another
// session sees none of them, and ending a session drops its heap.
func TestMCPREPL(t *testing.T) {
	url, stderr := startHTTPAt(t, "127.0.0.1:0", "--repl", "--demo-tools")
	connect := func() *mcpsdk.ClientSession {
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	a, b := connect(), connect()
	defer b.Close()
	tools, err := a.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := tools.Tools[0].Description; !strings.Contains(d, "Programs are the cells of one session") || strings.Contains(d, "`return` the result") {
		t.Errorf("the description does not describe cells:\n%.600s", d)
	}
	if isErr, v := callExecute(t, a, "const orders = (await tools.shop.listOrders({})).orders;\norders.length"); isErr || v["value"] == nil {
		t.Fatalf("cell 1: %v\n%s", v, stderr)
	}
	if isErr, v := callExecute(t, a, "let n: number = 0\nconst first = orders[0].id;\ntypeof first"); isErr || v["value"] != "string" {
		t.Fatalf("cell 2: %v", v)
	}
	// Concurrent calls of one session run one after the other, each in
	// the heap the one before left: every increment counts.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if isErr, v := callExecute(t, a, "n += 1; await tools.shop.listOrders({}); n"); isErr {
				t.Errorf("increment: %v", v)
			}
		}()
	}
	wg.Wait()
	if _, v := callExecute(t, a, "n"); v["value"] != 8.0 {
		t.Errorf("n after 8 concurrent increments = %v", v["value"])
	}
	// return is refused with what to write instead.
	if isErr, v := callExecute(t, a, "return n"); !isErr || !strings.Contains(toJSON(v), "end it with the expression") {
		t.Errorf("return: %v", v)
	}
	// Another session has its own heap.
	if isErr, v := callExecute(t, b, "typeof orders"); isErr || v["value"] != "undefined" {
		t.Errorf("another session sees %v", v)
	}
	_ = a.Close()
	// A new session after the first ended starts empty.
	c := connect()
	defer c.Close()
	if _, v := callExecute(t, c, "typeof n"); v["value"] != "undefined" {
		t.Errorf("a new session sees %v", v)
	}
}

func TestMCPREPLFlags(t *testing.T) {
	for _, args := range [][]string{{"--repl", "--cells"}, {"--repl", "--repl-max-state", "1KiB"}} {
		var stderr bytes.Buffer
		if code := runMCP(context.Background(), append(args, "--cache-dir", engineCache), strings.NewReader(""), &stderr, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--repl") {
			t.Errorf("%q: exit %d\n%s", args, code, &stderr)
		}
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMCPREPLAsks: a REPL cell's call the policy asks about reaches the
// user of a client with multi round-trip requests (the run goes on in
// the server while the client asks), and the cell's declarations are
// kept after the approved call.
func TestMCPREPLAsks(t *testing.T) {
	url, stderr := startHTTPAt(t, "127.0.0.1:0", "--repl", "--demo-tools", "--policy", "readonly=allow,default=ask")
	var asked []string
	copts := &mcpsdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
		asked = append(asked, req.Params.Message)
		return &mcpsdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}}
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, copts).
		Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	isErr, v := callExecute(t, cs, `const { orders } = await tools.shop.listOrders({ status: "open" });
const refund = await tools.shop.refundOrder({ orderId: orders[0].id, reason: "damaged" });
typeof refund`)
	if isErr || v["value"] != "object" || len(asked) != 1 || !strings.Contains(asked[0], "refundOrder") {
		t.Fatalf("result %v, asked %q\n%s", v, asked, stderr)
	}
	if isErr, v := callExecute(t, cs, "refund.orderId === orders[0].id"); isErr || v["value"] != true {
		t.Errorf("the next cell: %v", v)
	}
}

// TestMCPRunQueueFlags: --run-wait bounds how long a call waits for a run
// slot, from the command line; negative values are usage errors.
func TestMCPRunQueueFlags(t *testing.T) {
	url, stderr := startHTTPAt(t, "127.0.0.1:0", "--max-runs", "1", "--run-wait", "300ms", "--max-queued-runs", "1", "--timeout", "20s")
	connect := func() *mcpsdk.ClientSession {
		cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil).
			Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	a := connect()
	release := make(chan struct{})
	go func() {
		// Holds the only slot until the test is done with it.
		_, _ = a.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute",
			Arguments: map[string]any{"code": "const t0 = Date.now(); while (Date.now() - t0 < 8000) {} return 1"}})
		close(release)
	}()
	// A new session's call runs until a's run holds the slot; from then
	// on, it fails after --run-wait. (A new session each time: one whose
	// runs have ended quickly may take the extra slot beyond --max-runs.)
	refused := false
	for !refused {
		select {
		case <-release:
			t.Fatalf("a's run ended before b was ever refused a slot\n%s", stderr)
		default:
		}
		isErr, v := callExecute(t, connect(), "return 2")
		refused = isErr && strings.Contains(toJSON(v), "waited 300ms for a run slot")
		if isErr && !refused {
			t.Fatalf("b: %v", v)
		}
	}
	for _, args := range [][]string{{"--run-wait", "-1s"}, {"--max-queued-runs", "-1"}} {
		var errb bytes.Buffer
		if code := runMCP(context.Background(), append(args, "--cache-dir", engineCache), strings.NewReader(""), &errb, &errb); code != exitUsage {
			t.Errorf("%q: exit %d\n%s", args, code, &errb)
		}
	}
}
