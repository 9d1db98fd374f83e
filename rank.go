package codemode

import (
	"math"
	"strings"
	"sync"
)

// Search ranking: BM25F over four fields of every tool — its path (split
// at camelCase and separators), the first line of its description, the
// rest of the description, and its input properties with their
// descriptions — with light stemming, stop words and a small table of API
// synonyms. On a held-out set of 60 task phrasings over GitHub's 1,222
// tools it raised recall@5 from 0.57 (per-term substring scoring of path,
// description and input) to 0.90, and recall@1 from 0.30 to 0.52 (see
// TestGitHubSearchRecall in package openapi).

type field int

const (
	fieldPath field = iota
	fieldSummary
	fieldBody
	fieldParams
	numFields
)

// fieldWeight and fieldB are BM25F's per-field weight and length
// normalization; k1 saturates term frequency.
var (
	fieldWeight = [numFields]float64{3.0, 2.0, 0.5, 0.5}
	fieldB      = [numFields]float64{0.75, 0.5, 0.75, 0.75}
)

const bm25K1 = 1.2

type searchIndex struct {
	docs   []indexedDoc
	df     map[string]int
	avgLen [numFields]float64
}

type indexedDoc struct {
	tf     [numFields]map[string]float64
	length [numFields]int
	last   string // last path segment, lowercased and unsplit
}

type indexCache struct {
	once sync.Once
	idx  *searchIndex
}

func (rt *Runtime) searchIndex() *searchIndex {
	rt.idx.once.Do(func() {
		rt.idx.idx = buildIndex(rt.catalogEntries(), rt.index)
	})
	return rt.idx.idx
}

func buildIndex(cat []CatalogEntry, tools map[string]*toolEntry) *searchIndex {
	idx := &searchIndex{docs: make([]indexedDoc, len(cat)), df: map[string]int{}}
	for i, c := range cat {
		d := &idx.docs[i]
		summary, body, _ := strings.Cut(strings.TrimSpace(c.Description), "\n")
		texts := [numFields]string{strings.Join(c.Segments, " "), summary, body, ""}
		if e := tools[pathKey(c.Segments)]; e != nil {
			texts[fieldParams] = inputText(e)
		}
		seen := map[string]bool{}
		for f, text := range texts {
			d.tf[f] = map[string]float64{}
			for _, t := range searchTerms(text) {
				if stopWords[t] {
					continue
				}
				t = stem(t)
				d.tf[f][t]++
				d.length[f]++
				if !seen[t] {
					seen[t] = true
					idx.df[t]++
				}
			}
			idx.avgLen[f] += float64(d.length[f])
		}
		d.last = strings.ToLower(c.Segments[len(c.Segments)-1])
	}
	for f := range idx.avgLen {
		if len(cat) > 0 {
			idx.avgLen[f] /= float64(len(cat))
		}
		if idx.avgLen[f] == 0 {
			idx.avgLen[f] = 1
		}
	}
	return idx
}

// queryTerm is one term of a query with the alternatives that count as it.
type queryTerm struct {
	raw     string   // as typed, lowercased
	forms   []string // stemmed term and synonyms
	implied bool     // added by parseQuery, not typed
}

func parseQuery(q string) []queryTerm {
	var out []queryTerm
	hasVerb := false
	for _, t := range searchTerms(q) {
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

// verbs are the actions API operations are named for.
var verbs = map[string]bool{
	"get": true, "list": true, "create": true, "update": true, "delete": true, "remove": true,
	"add": true, "set": true, "search": true, "merge": true, "cancel": true, "download": true,
	"upload": true, "check": true, "lock": true, "unlock": true, "render": true,
}

// score is the BM25F score of document i, plus a bonus when a term is the
// tool's whole name.
func (idx *searchIndex) score(i int, terms []queryTerm) float64 {
	d := &idx.docs[i]
	n := float64(len(idx.docs))
	total, implied := 0.0, 0.0
	for _, qt := range terms {
		best := 0.0
		for k, form := range qt.forms {
			wtf := 0.0
			for f := field(0); f < numFields; f++ {
				tf := d.tf[f][form]
				if tf == 0 {
					continue
				}
				norm := 1 - fieldB[f] + fieldB[f]*float64(d.length[f])/idx.avgLen[f]
				wtf += fieldWeight[f] * tf / norm
			}
			if wtf == 0 {
				continue
			}
			df := float64(idx.df[form])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			s := idf * wtf * (bm25K1 + 1) / (wtf + bm25K1)
			if k > 0 {
				s *= 0.7 // a synonym counts less than the word itself
			}
			best = max(best, s)
		}
		if qt.implied {
			implied += best * 0.3
			continue
		}
		// A term that is the tool's whole name (merge, getContent) is a
		// strong signal, unless it is a bare verb many tools share.
		if qt.raw != "" && qt.raw == d.last && !verbs[qt.raw] {
			best += 2
		}
		total += best
	}
	// The implied term only orders tools the query already matched.
	if total == 0 {
		return 0
	}
	return total + implied
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

// synonyms maps a stemmed word to words an API is likely to use for it.
// They are generic API vocabulary, not any one service's.
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
