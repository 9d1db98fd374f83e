package redact

import (
	"encoding/base64"
	"net/url"
	"strings"
	"unicode"
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

// URLSecrets lists the credentials in the user information of every URL
// in s, wherever it stands (a whole argument, "--db=postgres://…", a
// connection string among others): the password as written and
// percent-decoded, or, when the password is empty or absent, the user
// name the same ways, since services that take a token in the URL take it
// as the user name (https://<token>@github.com/…, https://<key>:@…). A
// user name beside a password is left alone: it is an account name
// ("postgres", "root") that also turns up in ordinary output, where
// redacting it would hide what the output says without hiding anything
// secret.
func URLSecrets(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			return out
		}
		s = s[i+3:]
		// The authority ends where the path, query or fragment begins, or
		// where the URL does (white space, a quote). Its last "@" ends the
		// user information, as url.Parse reads it.
		auth := s[:authorityEnd(s)]
		at := strings.LastIndexByte(auth, '@')
		if at < 0 {
			continue
		}
		user, pass, _ := strings.Cut(auth[:at], ":")
		cred := pass
		if cred == "" {
			cred = user
		}
		if cred == "" {
			continue
		}
		out = append(out, cred)
		if dec, err := url.PathUnescape(cred); err == nil && dec != cred {
			out = append(out, dec)
		}
	}
}

// authorityEnd is where the authority at the start of s (just after
// "://") ends.
func authorityEnd(s string) int {
	for i, r := range s {
		switch {
		case r == '/' || r == '?' || r == '#' || r == '"' || r == '\'' || r == '<' || r == '>' || r == '`':
			return i
		case unicode.IsSpace(r):
			return i
		}
	}
	return len(s)
}
