package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/codemode-go/codemode/internal/discovery"
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
	// Types holds the declaration of the named type a query names
	// exactly (Customer), as tools.$codemode.types gives it.
	Types []TypeEntry `json:"types,omitempty"`
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
	in := func(e *toolEntry) bool {
		return namespace == "" || (len(e.path) >= 2 && e.path[0] == namespace) || strings.HasPrefix(e.name+".", namespace+".")
	}
	var pool []int
	if one := rt.lookupExact(query); one != nil {
		for i, e := range rt.tools {
			if e.name == one.name && in(e) {
				pool = append(pool, i)
			}
		}
	} else if order, ranked := rt.searchIndex().Rank(query); ranked {
		for _, i := range order {
			if in(rt.tools[i]) {
				pool = append(pool, i)
			}
		}
	} else {
		for i, e := range rt.tools {
			if in(e) {
				pool = append(pool, i)
			}
		}
	}
	res := SearchResult{Items: []CatalogEntry{}}
	// A query that is a type's name finds its declaration too.
	if q := strings.TrimSpace(query); q != "" && offset == 0 {
		if t, ok := rt.typeEntry(q, false); ok {
			res.Types = []TypeEntry{t}
		}
	}
	if offset < len(pool) {
		end := min(offset+limit, len(pool))
		for _, i := range pool[offset:end] {
			// Only what is returned is rendered. The model calls what it
			// reads: the item's path is the call site, not the audit name.
			c := rt.entry(i)
			c.Path = jsPath(c.Segments)
			res.Items = append(res.Items, c)
		}
		res.Remaining = len(pool) - end
		if res.Remaining > 0 {
			res.Next = &SearchNext{Offset: end}
		}
	}
	return res
}

// searchIndex is built once per Runtime, on the first search. Its
// positions are those of rt.tools, which the catalog shares.
func (rt *Runtime) searchIndex() *discovery.Index {
	rt.idx.once.Do(func() {
		docs := make([]discovery.Doc, len(rt.tools))
		for i, e := range rt.tools {
			docs[i] = discovery.Doc{Path: e.path, Description: e.tool.Description, Params: params(e)}
		}
		rt.idx.idx = discovery.NewIndex(docs)
	})
	return rt.idx.idx
}

type indexCache struct {
	once sync.Once
	idx  *discovery.Index
}

// params are a tool's input properties in name order.
func params(e *toolEntry) []discovery.Param {
	if e.tool.Input == nil {
		return nil
	}
	var out []discovery.Param
	for _, name := range slices.Sorted(maps.Keys(e.tool.Input.Properties)) {
		p := discovery.Param{Name: name}
		if s := e.tool.Input.Properties[name]; s != nil {
			p.Description = s.Description
		}
		out = append(out, p)
	}
	return out
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

// nearTools suggests the call sites of tools close to a wrong path.
func (rt *Runtime) nearTools(member string, n int) []string {
	paths := make([][]string, len(rt.tools))
	for i, e := range rt.tools {
		paths[i] = e.path
	}
	var out []string
	for _, i := range discovery.Suggest(member, paths, n) {
		out = append(out, jsPath(rt.tools[i].path))
	}
	return out
}
