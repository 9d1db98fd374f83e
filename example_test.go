package codemode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/codemode-go/codemode"
)

type order struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func Example() {
	lookup, err := codemode.NewTool("Look up an order by id.",
		func(ctx context.Context, in struct {
			ID string `json:"id"`
		}) (order, error) {
			if in.ID == "o-3" {
				return order{}, codemode.ToolError("no order o-3")
			}
			return order{ID: in.ID, Status: map[string]string{"o-1": "open", "o-2": "shipped"}[in.ID]}, nil
		})
	if err != nil {
		panic(err)
	}
	rt, err := codemode.New(codemode.Options{
		Tools:   codemode.Tools{"orders": codemode.Tools{"lookup": lookup}},
		Timeout: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	defer rt.Close()

	res, err := rt.Execute(context.Background(), `
		const ids = ["o-1", "o-2", "o-3"]
		const found = await Promise.allSettled(ids.map((id) => tools.orders.lookup({ id })))
		return found.map((r) => r.status === "fulfilled" ? r.value.status : r.reason.message)`)
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	// Output:
	// {"ok":true,"value":["open","shipped","no order o-3"],"toolCalls":[{"name":"orders.lookup"},{"name":"orders.lookup"},{"name":"orders.lookup"}]}
}

func ExampleExecute() {
	res, _ := codemode.Execute(context.Background(), codemode.Options{MaxOutputBytes: 40}, `
		interface Point { x: number; y: number }
		const pts: Point[] = [{ x: 1, y: 2 }, { x: 3, y: 4 }]
		console.log("points:", pts.length)
		return pts.map((p) => p.x * p.y)`)
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	// Output:
	// {"ok":true,"value":[2,12],"logs":["points: 2"],"toolCalls":[]}
}

func ExampleResult_diagnostic() {
	res, _ := codemode.Execute(context.Background(), codemode.Options{}, "const a = 1\nreturn a.b.c")
	fmt.Println(res.Error.Kind, res.Error.Location.Line)
	fmt.Println(res.Error.Message)
	// Output:
	// ExecutionFailure 2
	// TypeError: cannot read property 'c' of undefined
}
