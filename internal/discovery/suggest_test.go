package discovery

import (
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	paths := [][]string{
		{"orders", "lookup"},
		{"orders", "list"},
		{"customers", "lookup"},
		{"customers", "getCustomer"},
		{"context7", "resolve-library-id"},
	}
	long := strings.Repeat("x", maxSuggestName) + "orders.lookup"
	for _, tc := range []struct {
		name, wrong string
		n           int
		want        string
	}{
		{"typo", "orders.lokup", 3, "orders.lookup orders.list"},
		{"same name elsewhere", "billing.lookup", 3, "orders.lookup customers.lookup"},
		{"last segment, in path order", "order.lookup", 3, "orders.lookup customers.lookup"},
		{"at most n", "x.lookup", 1, "orders.lookup"},
		{"nothing near", "zzzzzz", 3, ""},
		{"odd name", "context7.resolve-library", 3, "context7.resolve-library-id"},
		// A long name from the program is not compared by edit distance,
		// which would cost its length times every tool name's; it still
		// gets exact last-segment matches.
		{"long name, no edit distance", long[:len(long)-1], 3, ""},
		{"long name, last segment", strings.Repeat("x", 300) + ".lookup", 3, "orders.lookup customers.lookup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, i := range Suggest(tc.wrong, paths, tc.n) {
				got = append(got, strings.Join(paths[i], "."))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("Suggest(%.40q) got %q, want %q", tc.wrong, strings.Join(got, " "), tc.want)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"lookup", "lokup", 1}, {"same", "same", 0}} {
		t.Run(tc.a+"/"+tc.b, func(t *testing.T) {
			if got := editDistance(tc.a, tc.b); got != tc.want {
				t.Errorf("editDistance(%q, %q) got %d, want %d", tc.a, tc.b, got, tc.want)
			}
		})
	}
}
