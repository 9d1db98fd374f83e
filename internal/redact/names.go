package redact

import (
	"encoding/base64"
	"strings"
)

// sensitiveWords are the name fragments that mark a header or variable as
// a credential.
var sensitiveWords = []string{"auth", "key", "token", "secret", "cookie", "session", "password", "passwd", "credential"}

// SensitiveName guesses from its name whether a header, environment
// variable or query parameter carries a credential: the name contains,
// in any case, auth, key, token, secret, cookie, session, password, passwd
// or credential.
func SensitiveName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range sensitiveWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// HeaderSecrets lists the secrets an authorization-style header value
// holds: the value itself; for "<scheme> <credentials>" ("Bearer abc",
// "token abc") also the credentials, the last field; and for Basic also
// the decoded "user:password" pair, the user and the password, since an
// upstream may echo them decoded.
func HeaderSecrets(value string) []string {
	out := []string{value}
	f := strings.Fields(value)
	if len(f) < 2 {
		return out
	}
	cred := f[len(f)-1]
	out = append(out, cred)
	if strings.EqualFold(f[0], "basic") {
		if b, err := base64.StdEncoding.DecodeString(cred); err == nil {
			pair := string(b)
			out = append(out, pair)
			if user, pass, ok := strings.Cut(pair, ":"); ok {
				out = append(out, user, pass)
			}
		}
	}
	return out
}
