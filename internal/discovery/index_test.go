package discovery

import (
	"slices"
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

// TestRankPartial: a word typed in part ("ord", "cust", "ship") finds the
// tools with a word it starts or sits inside, and a whole-word match
// still ranks above a partial one.
func TestRankPartial(t *testing.T) {
	x := NewIndex(shop)
	for _, tc := range []struct{ query, want string }{
		// The order among them is BM25F's; what matters is which match.
		{"ord", "orders.list orders.lookup orders.refund"},
		{"cust", "customers.addresses customers.getCustomer customers.searchCustomers"},
		{"ship", "customers.addresses"},
		{"librar", "context7.get-library-docs context7.resolve-library-id"},
		{"ibrary", "context7.get-library-docs context7.resolve-library-id"}, // inside a word
	} {
		t.Run(tc.query, func(t *testing.T) {
			got, _ := rank(x, shop, tc.query)
			sorted := strings.Fields(got)
			slices.Sort(sorted)
			if strings.Join(sorted, " ") != tc.want {
				t.Errorf("Rank(%q) got %q, want %q in any order", tc.query, got, tc.want)
			}
		})
	}
	t.Run("refund ord", func(t *testing.T) {
		if got, _ := rank(x, shop, "refund ord"); !strings.HasPrefix(got, "orders.refund ") {
			t.Errorf("got %q, want orders.refund first, then the other orders", got)
		}
	})
	t.Run("whole word first", func(t *testing.T) {
		docs := []Doc{
			{Path: []string{"a", "shipping"}, Description: "Shipping options, shipping rates and shipping zones."},
			{Path: []string{"a", "track"}, Description: "Track a ship."},
		}
		if got, _ := rank(NewIndex(docs), docs, "ship"); got != "a.track a.shipping" {
			t.Errorf("got %q, want %q", got, "a.track a.shipping")
		}
	})
	t.Run("too short", func(t *testing.T) {
		if got, _ := rank(x, shop, "or"); got != "" {
			t.Errorf("got %q, want nothing: two letters sit inside too many words", got)
		}
	})
}

// readme is modelled on ReadMe's API, where "get project" used to put
// getProject fifth: its siblings repeat "get" and "project" in their
// names, summaries and parameters, and BM25F rewards the repetition.
var readme = []Doc{
	{Path: []string{"readme", "getCategories"}, Description: "Get all categories\nReturns all the categories for a specified version of your project.", Params: []Param{{"project", "The project subdomain."}}},
	{Path: []string{"readme", "getDoc"}, Description: "Get doc\nReturns the doc with this slug in your project.", Params: []Param{{"slug", ""}, {"project", "The project subdomain."}}},
	{Path: []string{"readme", "getProject"}, Description: "Get metadata\nReturns the metadata of the workspace behind the API key."},
	{Path: []string{"readme", "getProjectApiKeys"}, Description: "Get project API keys\nGet the API keys of a project.", Params: []Param{{"project", "The project subdomain."}}},
	{Path: []string{"readme", "getProjectBranches"}, Description: "Get project branches\nGet the branches of a project.", Params: []Param{{"project", "The project subdomain."}}},
	{Path: []string{"readme", "getProjectSchema"}, Description: "Get project schema\nGet the JSON schema of a project's settings.", Params: []Param{{"project", "The project subdomain."}}},
	{Path: []string{"readme", "getProjectUsers"}, Description: "Get project users\nGet the users of a project.", Params: []Param{{"project", "The project subdomain."}}},
	{Path: []string{"readme", "getVersions"}, Description: "Get versions\nRetrieve a list of versions of a project.", Params: []Param{{"project", "The project subdomain."}}},
	{Path: []string{"readme", "updateProject"}, Description: "Update project\nUpdates a project's settings.", Params: []Param{{"project", "The project subdomain."}}},
}

// TestRankExactName: a query that spells a tool's name, in any case
// convention, ranks that tool first.
func TestRankExactName(t *testing.T) {
	x := NewIndex(readme)
	for _, tc := range []struct{ query, want string }{
		{"get project", "readme.getProject"},
		{"getProject", "readme.getProject"},
		{"GetProject", "readme.getProject"},
		{"get_project", "readme.getProject"},
		{"get-project", "readme.getProject"},
		{"getproject", "readme.getProject"},
		{"get project schema", "readme.getProjectSchema"},
		{"update project", "readme.updateProject"},
		{"readme get doc", "readme.getDoc"}, // with its namespace
	} {
		t.Run(tc.query, func(t *testing.T) {
			got, _ := rank(x, readme, tc.query)
			if first, _, _ := strings.Cut(got, " "); first != tc.want {
				t.Errorf("Rank(%q) got %q first (%s), want %q", tc.query, first, got, tc.want)
			}
		})
	}
}

// TestRankBounds: search runs on the host for a program, so a query's
// cost is bounded: words past maxQueryTerms, and bytes past
// maxQueryBytes, are not read.
func TestRankBounds(t *testing.T) {
	x := NewIndex(shop)
	var many []string
	for i := range maxQueryTerms {
		many = append(many, "zebra"+strings.Repeat("x", i))
	}
	for _, tc := range []struct{ name, query, want string }{
		{"last word read", strings.Join(many[:maxQueryTerms-1], " ") + " refund", "orders.refund"},
		{"word past the limit", strings.Join(many, " ") + " refund", ""},
		{"bytes past the limit", strings.Repeat("é", maxQueryBytes) + " refund", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := rank(x, shop, tc.query); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
