package cli

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// minTokenBytes is the shortest bearer token --http-token-env accepts: a
// token is the only thing between the network and every tool the server
// can call, so one short enough to guess is refused rather than used.
const minTokenBytes = 16

// loopbackHost reports whether host (a name or address, without port or
// brackets) is a loopback one: "localhost", 127.0.0.0/8 or ::1. Other
// names are not resolved: what a name resolves to can change after the
// check, so only the one name that is loopback by definition counts.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// loopbackBind reports whether a listen address (host:port) binds only
// loopback interfaces. An empty host (":8080") and the unspecified
// addresses (0.0.0.0, ::) bind every interface, so they are not.
func loopbackBind(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	return loopbackHost(host), nil
}

// httpGuard checks every request before the MCP handler sees it: the bearer
// token when one is configured, and otherwise (on a loopback listener) the
// Host and Origin headers, which are what a DNS-rebinding page cannot
// forge.
type httpGuard struct {
	next http.Handler

	// tokenSum is the SHA-256 of the configured token; nil means none.
	// Comparing digests keeps the comparison constant-time in the token's
	// length as well as its contents (subtle.ConstantTimeCompare returns
	// early on a length mismatch).
	tokenSum []byte

	// loopback is set when the listener is bound to a loopback address;
	// port is its port, which a Host header must name.
	loopback bool
	port     string
}

func newHTTPGuard(next http.Handler, token string, loopback bool, port string) *httpGuard {
	g := &httpGuard{next: next, loopback: loopback, port: port}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		g.tokenSum = sum[:]
	}
	return g
}

func (g *httpGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.loopback && g.tokenSum == nil {
		// Without a token, a loopback server trusts whoever can reach it,
		// which includes web pages in the user's browser: a page that
		// rebinds its own name to 127.0.0.1 sends that name as the Host,
		// and a page on another origin sends its Origin. (The SDK checks
		// the Host's name too, but not its port or the Origin.) With a
		// token such a page is refused anyway, as it cannot know it.
		if !g.hostOK(r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: Host %q is not this server's loopback address", r.Host), http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !originOK(o) {
			http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not a loopback origin", o), http.StatusForbidden)
			return
		}
	}
	if g.tokenSum != nil && !g.tokenOK(r.Header.Get("Authorization")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="codemode"`)
		http.Error(w, "Unauthorized: a valid bearer token is required (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
		return
	}
	g.next.ServeHTTP(w, r)
}

// hostOK accepts a loopback name or address with the listener's port. A
// Host without a port means port 80, as a client omits only the default.
func (g *httpGuard) hostOK(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), "80"
	}
	return port == g.port && loopbackHost(host)
}

// originOK accepts an http(s) origin on a loopback host, any port: a
// browser-based client served from another local port is still local.
// "null" (sandboxed frames, file: pages) is not a loopback origin.
func originOK(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return loopbackHost(u.Hostname())
}

// tokenOK checks an Authorization header against the token. The scheme is
// case-insensitive (RFC 7235); the token is compared in constant time.
func (g *httpGuard) tokenOK(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(sum[:], g.tokenSum) == 1
}
