package codemode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/google/jsonschema-go/jsonschema"
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
	fmt.Println(res.OK, string(res.Value))
	for _, call := range res.ToolCalls { // the audit: every admitted call, in order
		fmt.Println(call.Name, call.Outcome)
	}
	// Output:
	// true ["open","shipped","no order o-3"]
	// orders.lookup ok
	// orders.lookup ok
	// orders.lookup error
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

func ExampleResult_Err() {
	rt, _ := codemode.New(codemode.Options{Timeout: 20 * time.Millisecond})
	defer rt.Close()
	res, _ := rt.Execute(context.Background(), `while (true) {}`)
	if err := res.Err(); errors.Is(err, codemode.TimeoutExceeded) {
		fmt.Println("timed out:", err)
	}
	// Output:
	// timed out: TimeoutExceeded: the program did not finish within 20ms
}

func ExampleMerge() {
	ping := codemode.Tool{Description: "Answer pong.", Run: func(context.Context, json.RawMessage) (any, error) { return "pong", nil }}
	mine := codemode.Tools{"net": codemode.Tools{"ping": ping}}
	theirs := codemode.Tools{"net": codemode.Tools{"trace": ping}}
	if _, err := codemode.Merge(mine, theirs); errors.Is(err, codemode.ErrNameClash) {
		fmt.Println(err)
	}
	tools, _ := codemode.Merge(mine, codemode.Tools{"ops": codemode.Tools{"ping": ping}})
	res, _ := codemode.Execute(context.Background(), codemode.Options{Tools: tools},
		`return [await tools.net.ping({}), await tools.ops.ping({})]`)
	fmt.Println(string(res.Value))
	// Output:
	// tool name clash: "net" is given twice
	// ["pong","pong"]
}

func ExampleRuntime_Search() {
	noop := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	rt, _ := codemode.New(codemode.Options{Tools: codemode.Tools{
		"orders":    codemode.Tools{"refund": codemode.Tool{Description: "Refund an order in full.", Run: noop}},
		"customers": codemode.Tools{"get": codemode.Tool{Description: "Get a customer by id.", Run: noop}},
	}})
	defer rt.Close()
	for _, item := range rt.Search(codemode.SearchRequest{Query: "refund an order", Limit: 1}).Items {
		fmt.Println(item.Path)
	}
	// Output:
	// tools.orders.refund
}

func ExampleToolErrorCause() {
	lookup := codemode.Tool{Description: "Look up an order.", Run: func(context.Context, json.RawMessage) (any, error) {
		return nil, codemode.ToolErrorCause("the order store is unavailable", errors.New("dial tcp 10.0.0.7:5432: connection refused"))
	}}
	rt, _ := codemode.New(codemode.Options{
		Tools: codemode.Tools{"orders": codemode.Tools{"lookup": lookup}},
		OnToolCallEnd: func(_ context.Context, call codemode.CallEnd) {
			fmt.Println("host log:", call.Name, call.Outcome, errors.Unwrap(call.Err))
		},
	})
	defer rt.Close()
	res, _ := rt.Execute(context.Background(), `try { await tools.orders.lookup({}) } catch (e) { return e.message }`)
	fmt.Println("model sees:", string(res.Value))
	// Output:
	// host log: orders.lookup error dial tcp 10.0.0.7:5432: connection refused
	// model sees: "the order store is unavailable"
}

func ExampleTypes() {
	// The tools of one source share named types; a schema refers to one
	// as {"$ref": "#/$defs/<name>"} (codemode.TypeRef spells it).
	types := &codemode.Types{Names: []string{"order"}, Schema: func(name string) *jsonschema.Schema {
		return &jsonschema.Schema{Type: "object", Description: "An order.",
			Properties: map[string]*jsonschema.Schema{"id": {Type: "string"}}, Required: []string{"id"}}
	}}
	noop := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	rt, _ := codemode.New(codemode.Options{Tools: codemode.Tools{"orders": codemode.Tools{
		"latest": codemode.Tool{Description: "The latest order.", Types: types, Output: &jsonschema.Schema{Ref: codemode.TypeRef("order")}, Run: noop},
	}}})
	defer rt.Close()
	entry := rt.Catalog()[0]
	fmt.Println(entry.Signature)
	fmt.Println(entry.Types)
	fmt.Println(rt.Types("Order").Items[0].Declaration)
	// Output:
	// /** The latest order. */
	// tools.orders.latest(input?: Record<string, unknown>): Promise<Order>
	// [Order]
	// /** An order. */
	// type Order = {
	//   id: string;
	// };
}
