package discovery

import (
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
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
	// Name is the property's name; Description, its schema description.
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
	// partialWeight scales a partial word's match: "ord" in "order" is
	// weaker evidence than "order" itself, and a tool that lacks the word
	// the query typed should not overtake one that has it (RATIONALE.md,
	// "Why BM25F for search?", has the measurement behind the value). An
	// infix ("hook" in "webhook") counts half a prefix.
	partialWeight = 0.25
	infixWeight   = 0.5
	// minPartial is the shortest term matched as part of a word: shorter
	// ones are inside too many words to mean anything.
	minPartial = 3
)

// A model's query is a few words. Search runs on the host for a program,
// which can pass megabytes, and does not watch the run's deadline; the
// bounds keep its cost independent of what the program passes.
const (
	maxQueryBytes = 1 << 10
	maxQueryTerms = 32
)

// cut shortens query to maxQueryBytes, at a character boundary.
func cut(query string) string {
	if len(query) <= maxQueryBytes {
		return query
	}
	i := maxQueryBytes
	for i > 0 && !utf8.RuneStart(query[i]) {
		i--
	}
	return query[:i]
}

// Index ranks tools for queries. It is immutable once built and safe for
// concurrent use.
type Index struct {
	n      int
	length [][numFields]int
	avgLen [numFields]float64
	// postings lists, for each indexed word, the tools that have it and
	// how often in each field.
	postings map[string][]posting
	// vocab is every indexed word, for partial matches; sorted, so that
	// partial scores add up in the same order every time.
	vocab []string
	// last is each tool's last path segment, lowercased and unsplit.
	last []string
	// names are each tool's path suffixes (its name, its name with its
	// parent, ...) with their words joined, for exact-name matches.
	names [][]string
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
		names:    make([][]string, len(docs)),
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
		for k := len(d.Path) - 1; k >= 0; k-- {
			x.names[i] = append(x.names[i], joined(strings.Join(d.Path[k:], " ")))
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
	x.vocab = make([]string, 0, len(x.postings))
	for t := range x.postings {
		x.vocab = append(x.vocab, t)
	}
	sort.Strings(x.vocab)
	return x
}

// joined is text's words run together, so that "get project",
// "getProject", "get_project" and "get-project" are one name.
func joined(text string) string { return strings.Join(Terms(text), "") }

// Rank returns the positions of the tools that match query, best first;
// ties keep index order. A query with no word to rank by ("", "*", "the")
// gives ranked false: the caller lists the tools instead.
//
// A tool whose name is the query ("get project", "get_project" for
// getProject) comes first. The rest are ordered by BM25F: each query word
// scores, per tool, its best form (the word stemmed, or a synonym at a
// discount); a tool without any of them scores by the words it has that
// start with or contain the query word, at a further discount, so "ord"
// still finds orders.
func (x *Index) Rank(query string) (order []int, ranked bool) {
	query = cut(query)
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
		if !qt.implied {
			x.partial(qt.forms[0], best)
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
	name := joined(query)
	exact := make([]bool, x.n)
	var hits []int
	for i := range x.n {
		exact[i] = name != "" && slices.Contains(x.names[i], name)
		if total[i] > 0 || exact[i] {
			hits = append(hits, i)
			total[i] += implied[i]
		}
	}
	sort.SliceStable(hits, func(a, b int) bool {
		i, j := hits[a], hits[b]
		if exact[i] != exact[j] {
			return exact[i]
		}
		return total[i] > total[j]
	})
	return hits, true
}

// partial scores, for the tools with no whole match of term (best is
// zero), the words that contain it: their frequencies add up as if they
// were the term, with its document frequency counted over them all.
func (x *Index) partial(term string, best []float64) {
	if utf8.RuneCountInString(term) < minPartial {
		return
	}
	tf := map[int]*[numFields]float64{}
	docs := map[int]bool{}
	for _, p := range x.postings[term] {
		docs[p.doc] = true
	}
	for _, w := range x.vocab {
		if w == term {
			continue
		}
		weight := 1.0
		switch {
		case strings.HasPrefix(w, term):
		case strings.Contains(w, term):
			weight = infixWeight
		default:
			continue
		}
		for _, p := range x.postings[w] {
			docs[p.doc] = true
			if best[p.doc] > 0 {
				continue
			}
			acc := tf[p.doc]
			if acc == nil {
				acc = new([numFields]float64)
				tf[p.doc] = acc
			}
			for f := range numFields {
				acc[f] += weight * p.tf[f]
			}
		}
	}
	idf := x.idf(len(docs))
	for doc, c := range tf {
		best[doc] = partialWeight * x.bm25(doc, *c, idf)
	}
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
		if len(out) == maxQueryTerms {
			break
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
