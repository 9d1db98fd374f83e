package discovery

import (
	"fmt"
	"sort"

	"github.com/codemode-go/codemode/internal/spoof"
)

// Entry is one tool as the catalog budget sees it.
type Entry struct {
	// Namespace is the tool's first path segment.
	Namespace string
	// Path orders a namespace's entries and breaks ties of cost.
	Path string
	// Text is what the instructions would inline for the tool; its
	// estimated tokens are its cost.
	Text string
}

// Selection is the part of a catalog the instructions inline.
type Selection struct {
	// Groups are the namespaces in name order, each with its shown texts.
	Groups []Group
	// Shown counts the entries that fit, Total all of them.
	Shown, Total int
}

// Group is one namespace of a Selection.
type Group struct {
	Namespace string
	// Total counts the namespace's tools, shown or not.
	Total int
	// Shown are the texts of the entries that fit, in path order.
	Shown []string
}

// EstimateTokens is the budget's unit: characters / 4, rounded up, an
// estimate that needs no tokenizer and is the same for every model.
func EstimateTokens(s string) int { return (len([]rune(s)) + 3) / 4 }

// Select chooses the entries to inline within budget (estimated tokens).
// Namespaces take turns in name order, each offering its next cheapest
// entry, so that one large namespace cannot crowd out the others and
// every namespace shows what it offers before any shows more; a
// namespace whose next entry does not fit drops out while the others
// continue. A budget of zero or less selects nothing.
func Select(entries []Entry, budget int) Selection {
	type cand struct {
		Entry
		cost int
	}
	byNS := map[string][]cand{}
	var names []string
	for _, e := range entries {
		if _, ok := byNS[e.Namespace]; !ok {
			names = append(names, e.Namespace)
		}
		byNS[e.Namespace] = append(byNS[e.Namespace], cand{e, EstimateTokens(e.Text)})
	}
	sort.Strings(names)
	for _, ns := range names {
		c := byNS[ns]
		sort.SliceStable(c, func(i, j int) bool {
			if c[i].cost != c[j].cost {
				return c[i].cost < c[j].cost
			}
			return c[i].Path < c[j].Path
		})
	}
	next := map[string]int{}
	picked := map[string][]cand{}
	active := names
	if budget <= 0 {
		active = nil
	}
	left := budget
	for len(active) > 0 {
		var still []string
		for _, ns := range active {
			i := next[ns]
			if i >= len(byNS[ns]) {
				continue
			}
			c := byNS[ns][i]
			if c.cost > left {
				continue // this namespace drops out
			}
			left -= c.cost
			picked[ns] = append(picked[ns], c)
			next[ns] = i + 1
			still = append(still, ns)
		}
		active = still
	}
	sel := Selection{Total: len(entries)}
	for _, ns := range names {
		p := picked[ns]
		sort.SliceStable(p, func(i, j int) bool { return p[i].Path < p[j].Path })
		g := Group{Namespace: ns, Total: len(byNS[ns])}
		for _, c := range p {
			g.Shown = append(g.Shown, c.Text)
		}
		sel.Shown += len(p)
		sel.Groups = append(sel.Groups, g)
	}
	return sel
}

// Complete reports whether every entry is shown.
func (s Selection) Complete() bool { return s.Shown == s.Total }

// Header is the first line of the instructions' tool list, a sentence
// that says whether every tool is listed (the model need not search) or
// how many are (it knows to).
func (s Selection) Header() string {
	switch {
	case s.Complete() && s.Total == 1:
		return "The one tool is listed below."
	case s.Complete():
		return fmt.Sprintf("All %d tools are listed below.", s.Total)
	}
	return fmt.Sprintf("%d of %d tools are listed below.", s.Shown, s.Total)
}

// Label names a namespace with its counts: "alpha (2 tools, 1 shown)".
// A character of the name that does not show as itself is spelled out
// (spoof.Escape), as signatures spell it.
func (g Group) Label() string {
	ns := spoof.Escape(g.Namespace)
	tools := "tools"
	if g.Total == 1 {
		tools = "tool"
	}
	switch {
	case len(g.Shown) == g.Total:
		return fmt.Sprintf("%s (%d %s)", ns, g.Total, tools)
	case len(g.Shown) == 0:
		return fmt.Sprintf("%s (%d %s, none shown)", ns, g.Total, tools)
	}
	return fmt.Sprintf("%s (%d %s, %d shown)", ns, g.Total, tools, len(g.Shown))
}
