package codemode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/codemode-go/codemode"
)

// A run that waits for a person's approval without holding anything but
// bytes: the state goes to a file, the process may exit, and a new
// Runtime (in a new process, hours later) continues the run once the
// decision is made.
func ExampleRuntime_ExecuteSuspendable() {
	refund, _ := codemode.NewTool("Refund an order. A person approves each refund.",
		func(ctx context.Context, in struct {
			OrderID string `json:"orderId"`
		}) (map[string]string, error) {
			return map[string]string{"orderId": in.OrderID, "status": "refunded"}, nil
		})
	opts := codemode.Options{
		Tools: codemode.Tools{"orders": codemode.Tools{"refund": refund}},
		// The same secret in every process that resumes runs.
		StateKey: []byte("example key: use 32 random bytes"),
	}
	stateFile := filepath.Join(os.TempDir(), "codemode-example-state")
	defer os.Remove(stateFile)

	// First process: the program runs until it waits for the refunds.
	rt, _ := codemode.New(opts)
	_, s, err := rt.ExecuteSuspendable(context.Background(), `
const results = await Promise.allSettled(["o-1", "o-2"].map((orderId) => tools.orders.refund({ orderId })))
return results.map((r) => r.status === "fulfilled" ? r.value.status : r.reason.message)`)
	if err != nil {
		panic(err)
	}
	for _, p := range s.Pending {
		fmt.Printf("waiting for approval: %s %s\n", p.Name, p.Input)
	}
	_ = os.WriteFile(stateFile, s.State, 0o600)
	rt.Close()

	// Later, another process: the decisions arrive.
	rt, _ = codemode.New(opts)
	defer rt.Close()
	state, _ := os.ReadFile(stateFile)
	s, err = rt.Inspect(state) // the calls, from the authenticated state
	if err != nil {
		panic(err)
	}
	var results []codemode.CallResult
	for _, p := range s.Pending {
		var in struct{ OrderID string }
		_ = json.Unmarshal(p.Input, &in)
		if in.OrderID == "o-1" {
			results = append(results, rt.Call(context.Background(), p)) // approved: make the call
		} else {
			results = append(results, codemode.CallResult{ID: p.ID, Denied: "not approved"})
		}
	}
	res, s, err := rt.Resume(context.Background(), state, results...)
	if err != nil || s != nil {
		panic(fmt.Sprint(err, s))
	}
	fmt.Println(string(res.Value))
	// Output:
	// waiting for approval: orders.refund {"orderId":"o-1"}
	// waiting for approval: orders.refund {"orderId":"o-2"}
	// ["refunded","tools.orders.refund was denied: not approved"]
}
