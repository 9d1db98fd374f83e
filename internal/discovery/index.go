package discovery

import (
	"math"
	"sort"
	"strings"
)

// Doc is one tool as search sees it.
type Doc struct {
	// Path is the tool's path, namespace first.
	Path []string
	// Description is the tool's description; its first line is its
	// summary, which counts more than the rest.
	Description string
	// Params are the tool's input properties.
	Params []Param
}

// Param is one input property of a tool.
type Param struct {
	Name, Description string
}

// The fields of a tool that BM25F scores separately.
type field int

const (
	fieldPath    field = iota // the path split into words
	fieldSummary              // the first line of the description
	fieldBody                 // the rest of the description
	fieldParams               // input property names and descriptions
	numFields
)

// fieldWeight and fieldB are BM25F's per-field weight and length
// normalization; k1 saturates term frequency. A word in the path or the
// summary says what the tool does; the same word in a long body or among
// the parameters often only mentions something the tool touches.
var (
	fieldWeight = [numFields]float64{3.0, 2.0, 0.5, 0.5}
	fieldB      = [numFields]float64{0.75, 0.5, 0.75, 0.75}
)

const k1 = 1.2

// Discounts relative to the word the query typed.
const (
	// synonymWeight: a synonym counts less than the word itself.
	synonymWeight = 0.7
	// impliedWeight: the implied "list" of a query without a verb only
	// orders tools the query matched anyway.
	impliedWeight = 0.3
	// nameBonus is added when a typed word is a tool's whole name
	// (merge, getContent).
	nameBonus = 2.0
)

// Index ranks tools for queries. It is immutable once built and safe for
// concurrent use.
type Index struct {
	n      int
	length [][numFields]int
	avgLen [numFields]float64
	// postings lists, for each indexed word, the tools that have it and
	// how often in each field.
	postings map[string][]posting
	// last is each tool's last path segment, lowercased and unsplit.
	last []string
}

type posting struct {
	doc int
	tf  [numFields]float64
}

// NewIndex indexes docs; Rank answers with positions in docs.
func NewIndex(docs []Doc) *Index {
	x := &Index{
		n:        len(docs),
		length:   make([][numFields]int, len(docs)),
		postings: map[string][]posting{},
		last:     make([]string, len(docs)),
	}
	for i, d := range docs {
		summary, body, _ := strings.Cut(strings.TrimSpace(d.Description), "\n")
		var params strings.Builder
		for _, p := range d.Params {
			params.WriteString(p.Name)
			params.WriteString(" ")
			params.WriteString(p.Description)
			params.WriteString(" ")
		}
		texts := [numFields]string{strings.Join(d.Path, " "), summary, body, params.String()}
		tf := map[string]*[numFields]float64{}
		for f, text := range texts {
			for _, t := range Terms(text) {
				if stopWords[t] {
					continue
				}
				t = stem(t)
				if tf[t] == nil {
					tf[t] = new([numFields]float64)
				}
				tf[t][f]++
				x.length[i][f]++
			}
		}
		for t, c := range tf {
			x.postings[t] = append(x.postings[t], posting{i, *c})
		}
		for f := range numFields {
			x.avgLen[f] += float64(x.length[i][f])
		}
		if len(d.Path) > 0 {
			x.last[i] = strings.ToLower(d.Path[len(d.Path)-1])
		}
	}
	for f := range x.avgLen {
		if x.n > 0 {
			x.avgLen[f] /= float64(x.n)
		}
		if x.avgLen[f] == 0 {
			x.avgLen[f] = 1
		}
	}
	return x
}

// Rank returns the positions of the tools that match query, best first;
// ties keep index order. A query with no word to rank by ("", "*", "the")
// gives ranked false: the caller lists the tools instead.
//
// Tools are ordered by BM25F: each query word scores, per tool, its best
// form (the word stemmed, or a synonym at a discount).
func (x *Index) Rank(query string) (order []int, ranked bool) {
	terms := parseQuery(query)
	if len(terms) == 0 {
		return nil, false
	}
	total := make([]float64, x.n)
	implied := make([]float64, x.n)
	best := make([]float64, x.n)
	for _, qt := range terms {
		clear(best)
		for k, form := range qt.forms {
			ps := x.postings[form]
			idf := x.idf(len(ps))
			for _, p := range ps {
				s := x.bm25(p.doc, p.tf, idf)
				if k > 0 {
					s *= synonymWeight
				}
				best[p.doc] = max(best[p.doc], s)
			}
		}
		for i, s := range best {
			if qt.implied {
				implied[i] += s * impliedWeight
				continue
			}
			// A word that is the tool's whole name is a strong signal,
			// unless it is a bare verb many tools share.
			if qt.raw == x.last[i] && !verbs[qt.raw] {
				s += nameBonus
			}
			total[i] += s
		}
	}
	var hits []int
	for i := range x.n {
		if total[i] > 0 {
			hits = append(hits, i)
			total[i] += implied[i]
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return total[hits[a]] > total[hits[b]] })
	return hits, true
}

func (x *Index) idf(df int) float64 {
	n, d := float64(x.n), float64(df)
	return math.Log(1 + (n-d+0.5)/(d+0.5))
}

// bm25 is BM25F's score of one term in one tool: the field-weighted,
// length-normalized frequency, saturated.
func (x *Index) bm25(doc int, tf [numFields]float64, idf float64) float64 {
	wtf := 0.0
	for f := range numFields {
		if tf[f] == 0 {
			continue
		}
		norm := 1 - fieldB[f] + fieldB[f]*float64(x.length[doc][f])/x.avgLen[f]
		wtf += fieldWeight[f] * tf[f] / norm
	}
	if wtf == 0 {
		return 0
	}
	return idf * wtf * (k1 + 1) / (wtf + k1)
}

// queryTerm is one term of a query with the alternatives that count as it.
type queryTerm struct {
	raw     string   // as typed, lowercased
	forms   []string // stemmed term, then its synonyms
	implied bool     // added by parseQuery, not typed
}

func parseQuery(q string) []queryTerm {
	var out []queryTerm
	hasVerb := false
	for _, t := range Terms(q) {
		if stopWords[t] {
			continue
		}
		qt := queryTerm{raw: t, forms: []string{stem(t)}}
		for _, s := range synonyms[stem(t)] {
			qt.forms = append(qt.forms, stem(s))
		}
		for _, f := range qt.forms {
			hasVerb = hasVerb || verbs[f]
		}
		out = append(out, qt)
	}
	// A query of nouns ("deployments of a repository") asks for a list.
	if len(out) > 0 && !hasVerb {
		out = append(out, queryTerm{forms: []string{"list"}, implied: true})
	}
	return out
}
