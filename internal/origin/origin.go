// Package origin compares the origins of URLs (RFC 6454): credentials are
// sent only to the origin they were configured for, by the OpenAPI client
// and the MCP client alike.
package origin

import (
	"net/url"
	"strings"
)

// Same reports whether a and b have the same scheme, host and port, a
// missing port counting as its scheme's default.
func Same(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}
