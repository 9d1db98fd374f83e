package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// SearchRequest is a search of the tool catalog, by the host
// (Runtime.Search) or by a program (tools.$codemode.search takes the same
// fields).
type SearchRequest struct {
	// Query is matched against tool paths, names, descriptions and
	// parameters; empty lists the tools in catalog order.
	Query string `json:"query,omitempty"`
	// Namespace, when set, keeps only the tools under it.
	Namespace string `json:"namespace,omitempty"`
	// Limit is the most items returned. Zero means 10.
	Limit int `json:"limit,omitempty"`
	// Offset skips that many items, to page through results.
	Offset int `json:"offset,omitempty"`
}

// SearchResult is what tools.$codemode.search returns.
type SearchResult struct {
	Items     []CatalogEntry `json:"items"`
	Remaining int            `json:"remaining"`
	// Next, when more items remain, is the offset to pass back (spread it
	// into the same request: search({ ...request, ...result.next })).
	Next *SearchNext `json:"next"`
}

// SearchNext is the continuation of a paginated search.
type SearchNext struct {
	Offset int `json:"offset"`
}

func validateSearch(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return errors.New("the input must be an object { query?, namespace?, limit?, offset? }")
	}
	for k, v := range m {
		switch k {
		case "query", "namespace":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return fmt.Errorf("%s must be a string", k)
			}
		case "limit", "offset":
			var n float64
			if json.Unmarshal(v, &n) != nil || n != float64(int(n)) || n < 0 || (k == "limit" && (n < 1 || n > 100)) {
				if k == "limit" {
					return errors.New("limit must be an integer from 1 to 100")
				}
				return errors.New("offset must be a non-negative integer")
			}
		default:
			return fmt.Errorf("unknown property %q (expected query, namespace, limit, offset)", k)
		}
	}
	return nil
}

// searchTool serves tools.$codemode.search.
func (rt *Runtime) searchTool(_ context.Context, raw json.RawMessage) (any, error) {
	var req SearchRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, ToolError("invalid search input")
	}
	return rt.Search(req), nil
}

// Search ranks the catalog for a query, as tools.$codemode.search does.
// An empty query lists every tool (of the namespace, when given).
func (rt *Runtime) Search(req SearchRequest) SearchResult {
	query, namespace, limit, offset := req.Query, req.Namespace, req.Limit, req.Offset
	if limit <= 0 {
		limit = 10
	}
	if offset < 0 {
		offset = 0
	}
	cat := rt.catalogEntries()
	var pool []CatalogEntry
	var positions []int // of pool's entries in cat
	for i, c := range cat {
		if namespace != "" && (len(c.Segments) < 2 || c.Segments[0] != namespace) && !strings.HasPrefix(c.Path+".", namespace+".") {
			continue
		}
		pool = append(pool, c)
		positions = append(positions, i)
	}
	if one := rt.lookupExact(query); one != nil {
		for _, c := range pool {
			if c.Path == one.name {
				pool = []CatalogEntry{c}
				break
			}
		}
		if len(pool) != 1 || pool[0].Path != one.name {
			pool = nil
		}
	} else if terms := parseQuery(query); len(terms) > 0 {
		type scored struct {
			c     CatalogEntry
			score float64
		}
		idx := rt.searchIndex()
		var hits []scored
		for k, c := range pool {
			if s := idx.score(positions[k], terms); s > 0 {
				hits = append(hits, scored{c, s})
			}
		}
		sort.SliceStable(hits, func(i, j int) bool {
			if hits[i].score != hits[j].score {
				return hits[i].score > hits[j].score
			}
			return hits[i].c.Path < hits[j].c.Path
		})
		pool = pool[:0]
		for _, h := range hits {
			pool = append(pool, h.c)
		}
	}
	res := SearchResult{Items: []CatalogEntry{}}
	if offset < len(pool) {
		end := min(offset+limit, len(pool))
		res.Items = append(res.Items, pool[offset:end]...)
		res.Remaining = len(pool) - end
		if res.Remaining > 0 {
			res.Next = &SearchNext{Offset: end}
		}
	}
	return res
}

// lookupExact finds the one tool a query names exactly: its canonical
// path, the path with a "tools." prefix, or its bracket expression.
func (rt *Runtime) lookupExact(query string) *toolEntry {
	q := strings.TrimSpace(query)
	if q == "" {
		return nil
	}
	q = strings.TrimSuffix(q, "()")
	for _, e := range rt.tools {
		if q == e.name || q == "tools."+e.name || q == jsPath(e.path) || "tools."+q == jsPath(e.path) {
			return e
		}
	}
	return nil
}

// searchTerms splits a query into lowercase terms: camelCase boundaries
// and every non-alphanumeric character separate terms; "*" and empty
// terms are dropped.
func searchTerms(q string) []string {
	var terms []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			terms = append(terms, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(q)
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

// inputText is the searchable text of a tool's input: property names and
// their descriptions.
func inputText(e *toolEntry) string {
	if e.tool.Input == nil {
		return ""
	}
	var b strings.Builder
	for name, p := range e.tool.Input.Properties {
		b.WriteString(name)
		b.WriteString(" ")
		if p != nil {
			b.WriteString(p.Description)
			b.WriteString(" ")
		}
	}
	return b.String()
}
