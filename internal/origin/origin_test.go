package origin

import (
	"net/url"
	"testing"
)

func TestSame(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"https://api.example.com/v1", "https://API.example.com:443/other", true},
		{"http://example.com", "http://example.com:80/x", true},
		{"https://example.com", "http://example.com", false},
		{"https://example.com", "https://example.com:8443", false},
		{"https://example.com", "https://evil.example.com", false},
		{"http://127.0.0.1:8080", "http://localhost:8080", false},
	} {
		a, _ := url.Parse(tc.a)
		b, _ := url.Parse(tc.b)
		if got := Same(a, b); got != tc.want {
			t.Errorf("Same(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
