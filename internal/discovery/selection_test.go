package discovery

import (
	"strings"
	"testing"
)

func TestSelect(t *testing.T) {
	cheap := strings.Repeat("c", 20)     // 5 tokens
	expensive := strings.Repeat("e", 80) // 20 tokens
	entries := []Entry{
		{"alpha", "alpha.cheap", cheap},
		{"alpha", "alpha.expensive", expensive},
		{"beta", "beta.cheap", cheap},
	}
	for _, tc := range []struct {
		name   string
		budget int
		header string
		labels []string
	}{
		{"partial", 15, "2 of 3 tools are listed below.", []string{"alpha (2 tools, 1 shown)", "beta (1 tool)"}},
		{"one token", 1, "0 of 3 tools are listed below.", []string{"alpha (2 tools, none shown)", "beta (1 tool, none shown)"}},
		{"zero", 0, "0 of 3 tools are listed below.", []string{"alpha (2 tools, none shown)", "beta (1 tool, none shown)"}},
		{"negative", -1, "0 of 3 tools are listed below.", []string{"alpha (2 tools, none shown)", "beta (1 tool, none shown)"}},
		{"exactly enough", 30, "All 3 tools are listed below.", []string{"alpha (2 tools)", "beta (1 tool)"}},
		{"large", 10000, "All 3 tools are listed below.", []string{"alpha (2 tools)", "beta (1 tool)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := Select(entries, tc.budget)
			if got := sel.Header(); got != tc.header {
				t.Errorf("header got %q, want %q", got, tc.header)
			}
			var labels []string
			for _, g := range sel.Groups {
				labels = append(labels, g.Label())
			}
			if got, want := strings.Join(labels, "; "), strings.Join(tc.labels, "; "); got != want {
				t.Errorf("labels got %q, want %q", got, want)
			}
		})
	}
}

// TestLabelSpellsOutHiddenCharacters: a namespace whose name does not
// show as itself (New refuses one; this is the second line) is spelled
// out in its heading, as a signature spells it.
func TestLabelSpellsOutHiddenCharacters(t *testing.T) {
	g := Select([]Entry{{"\u202epay", "\u202epay.x", "1234"}}, 100).Groups[0]
	if got, want := g.Label(), `\u202epay (1 tool)`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestSelectRoundRobin: with a budget for three entries, each namespace
// gets its cheapest before any gets a second, and a namespace whose next
// entry does not fit drops out while the others go on.
func TestSelectRoundRobin(t *testing.T) {
	var entries []Entry
	for _, p := range []string{"a.a1", "a.a2", "a.a3", "b.b1", "b.b2", "b.b3"} {
		ns, _, _ := strings.Cut(p, ".")
		entries = append(entries, Entry{ns, p, "1234"}) // 1 token each
	}
	entries = append(entries, Entry{"c", "c.big", strings.Repeat("x", 400)})
	sel := Select(entries, 3)
	var got []string
	for _, g := range sel.Groups {
		got = append(got, g.Namespace+"="+strings.Join(g.Shown, ","))
	}
	if want := "a=1234,1234; b=1234; c="; strings.Join(got, "; ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, "; "), want)
	}
}

// TestSelectOrder: cheapest first within a namespace, shown in path order.
func TestSelectOrder(t *testing.T) {
	sel := Select([]Entry{
		{"n", "n.b", "bbbbbbbb"}, // 2 tokens
		{"n", "n.c", "cccc"},     // 1
		{"n", "n.a", "aaaaaaaaaaaa"},
	}, 3)
	if got, want := strings.Join(sel.Groups[0].Shown, ","), "bbbbbbbb,cccc"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestEstimateTokens(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{{"", 0}, {"a", 1}, {"abcd", 1}, {"abcde", 2}, {"ééééé", 2}} {
		t.Run(tc.in, func(t *testing.T) {
			if got := EstimateTokens(tc.in); got != tc.want {
				t.Errorf("EstimateTokens(%q) got %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}
