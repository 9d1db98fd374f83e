package codemode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/store"
)

// Rules declare a policy: reads run, deletions are refused, everything
// else is asked about, and Approve answers for a person, seeing the
// whole input as Shown writes it.
func ExampleRules() {
	tool := func(name string, a *codemode.Annotations) codemode.Tool {
		return codemode.Tool{Annotations: a, Run: func(context.Context, json.RawMessage) (any, error) { return name + " done", nil }}
	}
	rules, err := codemode.ParseRules("readonly=allow,destructive=deny,default=ask")
	if err != nil {
		panic(err)
	}
	rt, _ := codemode.New(codemode.Options{
		Tools: codemode.Tools{"files": codemode.Tools{
			"read":   tool("read", &codemode.Annotations{ReadOnly: true}),
			"delete": tool("delete", &codemode.Annotations{Destructive: true}),
			"write":  tool("write", nil),
		}},
		Policy: rules.Policy(),
		Approve: func(_ context.Context, c codemode.Call, question string) codemode.Decision {
			fmt.Printf("asked %q about %s\n", question, c.Shown())
			return codemode.Decision{Verdict: codemode.Allow}
		},
	})
	defer rt.Close()
	res, _ := rt.Execute(context.Background(), `const out = []
for (const t of ["read", "delete", "write"]) {
  try { out.push(await tools.files[t]({ name: "notes.txt", force: true })) } catch (e) { out.push(e.message) }
}
return out`)
	fmt.Println(string(res.Value))
	// Output:
	// asked "allow files.write?" about {"force":true,"name":"notes.txt"}
	// ["read done","tools.files.delete was denied: files.delete is not allowed here","write done"]
}

// A transaction's completed calls are undone, latest first, when the run
// fails before it commits.
func ExampleTool_compensate() {
	var undone []string
	step := func(name string) codemode.Tool {
		return codemode.Tool{
			Run: func(context.Context, json.RawMessage) (any, error) {
				if name == "ship" {
					return nil, codemode.ToolError("no courier today")
				}
				return map[string]string{"receipt": name + "-1"}, nil
			},
			Compensate: func(_ context.Context, _, out json.RawMessage) error {
				undone = append(undone, string(out))
				return nil
			},
		}
	}
	rt, _ := codemode.New(codemode.Options{Tools: codemode.Tools{"shop": codemode.Tools{
		"reserve": step("reserve"), "charge": step("charge"), "ship": step("ship"),
	}}})
	defer rt.Close()
	res, _ := rt.Execute(context.Background(), `const { tx } = await tools.$codemode.begin({ touches: ["shop.reserve", "shop.charge", "shop.ship"] })
await tools.shop.reserve({})
await tools.shop.charge({})
await tools.shop.ship({})
await tools.$codemode.commit({ tx })`)
	fmt.Println(res.Error.Message)
	fmt.Println(undone)
	// Output:
	// no courier today; the open transaction was rolled back (2 of 2 calls undone)
	// [{"receipt":"charge-1"} {"receipt":"reserve-1"}]
}

// Values a session's programs keep from one run to the next.
func ExampleOptions_values() {
	rt, _ := codemode.New(codemode.Options{Values: store.NewMemoryValues(0, 0)})
	defer rt.Close()
	alice := codemode.WithSession(context.Background(), "alice")
	_, _ = rt.Execute(alice, `await tools.$codemode.store({ key: "cursor", value: { page: 3 } })`)
	res, _ := rt.Execute(alice, `return (await tools.$codemode.load({ key: "cursor" })).value`)
	other, _ := rt.Execute(codemode.WithSession(context.Background(), "bob"), `return (await tools.$codemode.keys()).keys`)
	fmt.Println(string(res.Value), string(other.Value))
	// Output:
	// {"page":3} []
}

// A cell goes on after its caller stops waiting; Wait collects what it
// printed, then its Result.
func ExampleCells() {
	rt, _ := codemode.New(codemode.Options{Timeout: 10 * time.Second})
	defer rt.Close()
	cells, _ := codemode.NewCells(codemode.CellOptions{YieldBytes: 1})
	defer cells.Close()
	id, _ := cells.Start(context.Background(), rt, `for (let i = 1; i <= 3; i++) {
  console.log("step " + i)
  await new Promise((r) => setTimeout(r, 20))
}
return "done"`)
	var lines []string
	for {
		u, err := cells.Wait(context.Background(), id, time.Second)
		if err != nil {
			panic(err)
		}
		lines = append(lines, u.Logs...)
		if u.Done {
			fmt.Println(lines, string(u.Result.Value))
			return
		}
	}
	// Output:
	// [step 1 step 2 step 3] "done"
}
