package typescript

import (
	"context"
	"testing"
)

func BenchmarkCompileSmall(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := Compile(context.Background(), "return 1"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompileTypical(b *testing.B) {
	code := `const { orders } = await tools.shop.listOrders({ status: "open" })
const ids = [...new Set(orders.map((o) => o.customerId))]
const customers = await Promise.all(ids.map((id) => tools.shop.getCustomer({ id })))
const byId = new Map(customers.map((c) => [c.id, c]))
const totals: Record<string, number> = {}
for (const o of orders) {
  const name = byId.get(o.customerId).name
  totals[name] = (totals[name] ?? 0) + o.totalCents
}
return Object.entries(totals).map(([customer, cents]) => ({ customer, total: (cents / 100).toFixed(2) }))`
	for i := 0; i < b.N; i++ {
		if _, err := Compile(context.Background(), code); err != nil {
			b.Fatal(err)
		}
	}
}
