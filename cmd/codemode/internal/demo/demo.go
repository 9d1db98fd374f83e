// Package demo is the small built-in tool set and example program behind
// `codemode demo`.
package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/codemode-go/codemode"
)

// Program is the example a model might write: list open orders, look up
// each customer in parallel, and return totals per customer.
const Program = `const { orders } = await tools.shop.listOrders({ status: "open" })
const ids = [...new Set(orders.map((o) => o.customerId))]
const customers = await Promise.all(ids.map((id) => tools.shop.getCustomer({ id })))
const byId = new Map(customers.map((c) => [c.id, c]))
const totals = {}
for (const o of orders) {
  const name = byId.get(o.customerId).name
  totals[name] = (totals[name] ?? 0) + o.totalCents
}
console.log("open orders:", orders.length)
return Object.entries(totals)
  .map(([customer, cents]) => ({ customer, total: (cents / 100).toFixed(2) }))
  .sort((a, b) => b.total - a.total)`

type order struct {
	ID         string `json:"id"`
	CustomerID string `json:"customerId"`
	Status     string `json:"status" jsonschema:"open, shipped or cancelled"`
	TotalCents int    `json:"totalCents" jsonschema:"order total in cents"`
}

type customer struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

var (
	orders = []order{
		{"o-1001", "c-1", "open", 4599}, {"o-1002", "c-2", "shipped", 1250},
		{"o-1003", "c-1", "open", 1999}, {"o-1004", "c-3", "open", 30000},
		{"o-1005", "c-2", "open", 875}, {"o-1006", "c-3", "cancelled", 12000},
	}
	customers = map[string]customer{
		"c-1": {"c-1", "Ada Lovelace", "ada@example.test"},
		"c-2": {"c-2", "Grace Hopper", "grace@example.test"},
		"c-3": {"c-3", "Katherine Johnson", "katherine@example.test"},
	}
)

type listIn struct {
	Status string `json:"status,omitempty" jsonschema:"only orders with this status: open, shipped or cancelled"`
}
type listOut struct {
	Orders []order `json:"orders"`
}
type getIn struct {
	ID string `json:"id" jsonschema:"customer id, e.g. c-1"`
}

// Tools returns the demo tool tree: tools.shop.listOrders,
// tools.shop.getCustomer and tools.shop.refundOrder (which changes
// nothing), served from memory with a small delay to stand in for a
// network.
func Tools() codemode.Tools {
	list, err := codemode.NewTool("List orders, optionally by status.",
		func(ctx context.Context, in listIn) (listOut, error) {
			if err := pause(ctx); err != nil {
				return listOut{}, err
			}
			out := listOut{Orders: []order{}}
			for _, o := range orders {
				if in.Status == "" || o.Status == in.Status {
					out.Orders = append(out.Orders, o)
				}
			}
			return out, nil
		})
	if err != nil {
		panic(err) // the types above are fixed; this cannot fail
	}
	get, err := codemode.NewTool("Get a customer by id.",
		func(ctx context.Context, in getIn) (customer, error) {
			if err := pause(ctx); err != nil {
				return customer{}, err
			}
			c, ok := customers[in.ID]
			if !ok {
				return customer{}, codemode.ToolError(fmt.Sprintf("no customer %q (known: %v)", in.ID, customerIDs()))
			}
			return c, nil
		})
	if err != nil {
		panic(err)
	}
	refund, err := codemode.NewTool("Refund an order in full. It moves money: a person approves each refund.",
		func(ctx context.Context, in refundIn) (refundOut, error) {
			if err := pause(ctx); err != nil {
				return refundOut{}, err
			}
			for _, o := range orders {
				if o.ID == in.OrderID {
					return refundOut{OrderID: o.ID, RefundedCents: o.TotalCents, Status: "refunded"}, nil
				}
			}
			return refundOut{}, codemode.ToolError(fmt.Sprintf("no order %q", in.OrderID))
		})
	if err != nil {
		panic(err)
	}
	list.Annotations = &codemode.Annotations{ReadOnly: true}
	get.Annotations = &codemode.Annotations{ReadOnly: true}
	return codemode.Tools{"shop": codemode.Tools{"listOrders": list, "getCustomer": get, "refundOrder": refund}}
}

type refundIn struct {
	OrderID string `json:"orderId" jsonschema:"order id, e.g. o-1001"`
	Reason  string `json:"reason,omitempty" jsonschema:"why, for the person who approves it"`
}

type refundOut struct {
	OrderID       string `json:"orderId"`
	RefundedCents int    `json:"refundedCents"`
	Status        string `json:"status"`
}

func pause(ctx context.Context) error {
	t := time.NewTimer(5 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
