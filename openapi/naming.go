package openapi

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codemode-go/codemode"
)

// toolPath names an operation's tool. An operationId is split on "." and
// "/" into namespace levels, and each level is made an identifier (other
// separators become camelCase word breaks). Without a usable operationId
// the name comes from the method and path.
func toolPath(operationID, method, path string) []string {
	var segs []string
	for _, dotted := range strings.Split(operationID, ".") {
		for _, part := range strings.Split(dotted, "/") {
			if id := identifier(part); id != "" {
				segs = append(segs, id)
			}
		}
	}
	if len(segs) == 0 {
		segs = []string{methodPathName(method, path)}
	}
	return segs
}

// identifier joins the words of s in camelCase: the first word keeps its
// case, each later word gets an upper-case first letter ("get-content" →
// "getContent", "list_orders" → "listOrders"). A leading digit gets a "_"
// prefix, and a name codemode reserves a "_" suffix (codemode.SafeName).
func identifier(s string) string {
	var b strings.Builder
	for i, w := range words(s) {
		if i > 0 {
			w = upperFirst(w)
		}
		b.WriteString(w)
	}
	id := b.String()
	if id == "" {
		return ""
	}
	if r, _ := utf8.DecodeRuneInString(id); unicode.IsDigit(r) {
		id = "_" + id
	}
	id = codemode.SafeName(id)
	return id
}

// words splits s on every character that cannot be part of a JavaScript
// identifier word (letters, digits and "$" can).
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '$')
	})
}

func upperFirst(w string) string {
	r, n := utf8.DecodeRuneInString(w)
	if n == 0 {
		return w
	}
	return string(unicode.ToUpper(r)) + w[n:]
}

// methodPathName names an operation without an operationId: the method,
// then each literal path word capitalized and each template variable as
// "By" + its name: GET /users/{id}/posts → getUsersByIdPosts.
func methodPathName(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(identifier(method)))
	rest := path
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			open = len(rest)
		}
		for _, w := range words(rest[:open]) {
			b.WriteString(upperFirst(w))
		}
		rest = rest[open:]
		if rest == "" {
			break
		}
		name, after, _ := strings.Cut(rest[1:], "}") // an unclosed brace runs to the end
		b.WriteString("By")
		for _, w := range words(name) {
			b.WriteString(upperFirst(w))
		}
		rest = after
	}
	name := b.String()
	if name == "" {
		name = "call"
	}
	return codemode.SafeName(name)
}

// uniquePaths makes every tool path distinct and keeps tools and
// namespaces apart, deterministically in document order: a namespace
// always keeps its name, and a tool whose path is taken (by an earlier
// tool, or by a namespace some other tool lives in) gets the first free
// suffix _2, _3, ... on its last segment.
func uniquePaths(paths [][]string) [][]string {
	namespaces := map[string]bool{}
	for _, p := range paths {
		for i := 1; i < len(p); i++ {
			namespaces[pathKey(p[:i])] = true
		}
	}
	taken := map[string]bool{}
	out := make([][]string, len(paths))
	for i, p := range paths {
		q := append([]string(nil), p...)
		last := q[len(q)-1]
		for n := 2; taken[pathKey(q)] || namespaces[pathKey(q)]; n++ {
			q[len(q)-1] = last + "_" + strconv.Itoa(n)
		}
		taken[pathKey(q)] = true
		out[i] = q
	}
	return out
}

func pathKey(p []string) string { return strings.Join(p, "\x00") }

// insertTool places t at path in the tree. uniquePaths guarantees that no
// segment along the way is already a tool.
func insertTool(tree codemode.Tools, path []string, t codemode.Tool) {
	node := tree
	for _, seg := range path[:len(path)-1] {
		next, ok := node[seg].(codemode.Tools)
		if !ok {
			next = codemode.Tools{}
			node[seg] = next
		}
		node = next
	}
	node[path[len(path)-1]] = t
}

// genericTitleWords are skipped when a namespace is derived from a title.
var genericTitleWords = map[string]bool{
	"api": true, "apis": true, "rest": true, "restful": true, "openapi": true, "swagger": true,
	"http": true, "https": true, "the": true, "a": true, "an": true, "web": true,
	"spec": true, "specification": true, "service": true, "services": true, "description": true,
}

// namespaceFor derives a namespace from an API title: the first word that
// is neither generic (api, rest, openapi, swagger, the, ...) nor a version
// (v3, 2.0), lowercased, with only a-z and 0-9 kept; "api" when no word
// qualifies. Words break at anything but letters and digits. "GitHub v3
// REST API" → "github", "Swagger Petstore - OpenAPI 3.0" → "petstore".
func namespaceFor(title string) string {
	for _, w := range words(strings.ToLower(title)) {
		w = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, w)
		if w == "" || genericTitleWords[w] || isVersionWord(w) {
			continue
		}
		return w
	}
	return "api"
}

// isVersionWord reports words like "v3", "2", "2022" or "v1beta".
func isVersionWord(w string) bool {
	if w[0] >= '0' && w[0] <= '9' {
		return true
	}
	return w[0] == 'v' && len(w) > 1 && w[1] >= '0' && w[1] <= '9'
}
