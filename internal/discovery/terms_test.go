package discovery

import (
	"strings"
	"testing"
)

func TestTerms(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"listOrders", "list orders"},
		{"getHTTPResponseCode", "get http response code"},
		{"repos/get-content", "repos get content"},
		{"  * user_id  ", "user id"},
		{"ÜberCase résumé2", "über case résumé2"},
		{"v2.session.get", "v2 session get"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := strings.Join(Terms(tc.in), " "); got != tc.want {
				t.Errorf("Terms(%q) got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestStem(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"addresses", "address"}, {"orders", "order"}, {"issues", "issue"}, {"branches", "branch"},
		{"policies", "policy"}, {"status", "status"}, {"access", "access"}, {"is", "is"}, {"bus", "bus"},
		{"analysis", "analysis"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := stem(tc.in); got != tc.want {
				t.Errorf("stem(%q) got %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
