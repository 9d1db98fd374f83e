package discovery

import (
	"strings"
	"unicode"
)

// Terms splits text into lowercase terms: camelCase boundaries and every
// character that is not a letter or digit separate terms ("getHTTPCode"
// and "get_http-code" both give get, http, code).
func Terms(text string) []string {
	var terms []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			terms = append(terms, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(text)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))) {
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	return terms
}

// stem reduces plural forms so "issues" meets "issue" and "branches"
// meets "branch". It is applied alike to tools and queries.
func stem(t string) string {
	switch {
	case len(t) > 4 && strings.HasSuffix(t, "ies"):
		return t[:len(t)-3] + "y"
	case len(t) > 4 && (strings.HasSuffix(t, "sses") || strings.HasSuffix(t, "xes") || strings.HasSuffix(t, "ches") || strings.HasSuffix(t, "shes")):
		return t[:len(t)-2]
	case len(t) > 3 && strings.HasSuffix(t, "s") && !strings.HasSuffix(t, "ss") && !strings.HasSuffix(t, "us") && !strings.HasSuffix(t, "is"):
		return t[:len(t)-1]
	}
	return t
}

// stopWords carry no meaning in a tool query.
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "in": true, "on": true, "for": true, "to": true,
	"by": true, "with": true, "from": true, "and": true, "or": true, "is": true, "are": true, "be": true,
	"it": true, "its": true, "this": true, "that": true, "these": true, "some": true, "any": true,
	"i": true, "me": true, "my": true, "we": true, "our": true, "you": true, "your": true, "do": true,
	"how": true, "what": true, "which": true, "who": true, "can": true, "all": true, "into": true, "via": true,
}

// verbs are the actions API operations are named for.
var verbs = map[string]bool{
	"get": true, "list": true, "create": true, "update": true, "delete": true, "remove": true,
	"add": true, "set": true, "search": true, "merge": true, "cancel": true, "download": true,
	"upload": true, "check": true, "lock": true, "unlock": true, "render": true,
}

// synonyms maps a stemmed word to words an API is likely to use for it.
// They are generic API vocabulary, not any one service's: the recall
// tests run on two APIs (GitHub and Figma) so that tuning for one shows
// on the other.
var synonyms = map[string][]string{
	"remove":       {"delete"},
	"delete":       {"remove"},
	"add":          {"create", "set"},
	"new":          {"create"},
	"make":         {"create"},
	"open":         {"create"},
	"publish":      {"create"},
	"create":       {"add"},
	"fetch":        {"get"},
	"read":         {"get", "content"},
	"retrieve":     {"get"},
	"show":         {"get"},
	"view":         {"get"},
	"edit":         {"update"},
	"change":       {"update"},
	"modify":       {"update"},
	"close":        {"update"},
	"find":         {"search", "list"},
	"lookup":       {"get", "search"},
	"history":      {"list"},
	"repo":         {"repository"},
	"repository":   {"repo"},
	"org":          {"organization"},
	"organization": {"org"},
	"pr":           {"pull"},
	"current":      {"authenticated"},
	"file":         {"content"},
	"diff":         {"compare"},
	"invite":       {"invitation"},
	"member":       {"membership"},
	"approve":      {"review"},
	"review":       {"reviewer"},
	"permission":   {"access", "collaborator"},
	"access":       {"permission", "collaborator"},
	"trigger":      {"dispatch", "create"},
	"manually":     {"dispatch"},
	"run":          {"workflow"},
	"tag":          {"ref"},
	"branch":       {"ref"},
	"tree":         {"tree"},
	"log":          {"logs"},
}
