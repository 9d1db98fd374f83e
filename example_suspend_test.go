package codemode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/store"
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
			results = append(results, rt.RunPending(context.Background(), p)) // approved: make the call
		} else {
			results = append(results, codemode.CallResult{Index: p.Index, Denied: "not approved"})
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

// Steps runs each step of a suspended run once, whoever resumes it: the
// record in the run store is taken before the answer makes any call, so
// an approval replayed, or resumed by two processes at once, is refused.
func ExampleSteps() {
	pay, _ := codemode.NewTool("Pay someone. A person approves each payment.",
		func(ctx context.Context, in struct {
			To string `json:"to"`
		}) (string, error) {
			return "paid " + in.To, nil
		})
	rt, _ := codemode.New(codemode.Options{
		Tools:    codemode.Tools{"bank": codemode.Tools{"pay": pay}},
		StateKey: []byte("example key: use 32 random bytes"),
	})
	defer rt.Close()
	// store.OpenDirRuns(dir) shares the records between the processes of
	// a machine.
	steps := codemode.Steps{Runtime: rt, Runs: &store.MemoryRuns{}}

	_, s, _ := steps.Start(context.Background(), `return await tools.bank.pay({ to: "alice" })`)
	approve := func(ctx context.Context, s *codemode.Suspended) ([]codemode.CallResult, error) {
		var results []codemode.CallResult
		for _, p := range s.Pending {
			results = append(results, rt.RunPending(ctx, p))
		}
		return results, nil
	}
	res, _, err := steps.Resume(context.Background(), s.State, approve)
	fmt.Println(string(res.Value), err)
	_, _, err = steps.Resume(context.Background(), s.State, approve) // the same approval again
	fmt.Println(errors.Is(err, codemode.ErrStepTaken))
	// Output:
	// "paid alice" <nil>
	// true
}
