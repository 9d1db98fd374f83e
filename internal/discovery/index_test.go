package discovery

import (
	"strings"
	"testing"
)

// shop is a small catalog in path order, like the root package's.
var shop = []Doc{
	{Path: []string{"context7", "get-library-docs"}, Description: "Fetch documentation for a library id.", Params: []Param{{"id", ""}, {"topic", ""}}},
	{Path: []string{"context7", "resolve-library-id"}, Description: "Resolve a package name to a library id.", Params: []Param{{"libraryName", ""}}},
	{Path: []string{"customers", "addresses"}, Description: "List a customer's shipping addresses.", Params: []Param{{"customerId", ""}}},
	{Path: []string{"customers", "getCustomer"}, Description: "Get a customer profile.", Params: []Param{{"customerId", ""}}},
	{Path: []string{"customers", "searchCustomers"}, Description: "Find customers by name or email.", Params: []Param{{"query", ""}}},
	{Path: []string{"orders", "list"}, Description: "List orders, newest first.\nPaginated by cursor.", Params: []Param{{"cursor", ""}, {"status", "Only orders in this state."}}},
	{Path: []string{"orders", "lookup"}, Description: "Look up one order by id.", Params: []Param{{"id", ""}}},
	{Path: []string{"orders", "refund"}, Description: "Refund an order, fully or partly.", Params: []Param{{"amountCents", "Amount to refund; the whole order when absent."}, {"id", ""}}},
}

// rank returns the dot-joined paths Rank gives for query, and whether
// the query was ranked at all.
func rank(x *Index, docs []Doc, query string) (string, bool) {
	order, ranked := x.Rank(query)
	var got []string
	for _, i := range order {
		got = append(got, strings.Join(docs[i].Path, "."))
	}
	return strings.Join(got, " "), ranked
}

func TestRank(t *testing.T) {
	x := NewIndex(shop)
	for _, tc := range []struct {
		query, want string
		ranked      bool
	}{
		{"refund order", "orders.refund orders.list orders.lookup", true},
		{"customer addresses", "customers.addresses customers.getCustomer customers.searchCustomers", true},
		{"library docs", "context7.get-library-docs context7.resolve-library-id", true},
		{"zebra", "", true},
		// Nothing to rank by: the caller lists the catalog instead.
		{"", "", false},
		{"*", "", false},
		{"the of a", "", false},
	} {
		t.Run(tc.query, func(t *testing.T) {
			got, ranked := rank(x, shop, tc.query)
			if got != tc.want || ranked != tc.ranked {
				t.Errorf("Rank(%q) got %q (ranked %v), want %q (ranked %v)", tc.query, got, ranked, tc.want, tc.ranked)
			}
		})
	}
}

func TestRankEmptyIndex(t *testing.T) {
	order, ranked := NewIndex(nil).Rank("anything")
	if len(order) != 0 || !ranked {
		t.Errorf("got %v (ranked %v), want nothing (ranked true)", order, ranked)
	}
}
