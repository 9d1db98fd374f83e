package discovery

import (
	"sort"
	"strings"
)

// maxSuggestName is the longest unknown name compared by edit distance:
// the comparison costs its length times each tool name's, and the name
// comes from the program, so a longer one gets only exact last-segment
// matches.
const maxSuggestName = 128

// Suggest answers "did you mean" for a call to an unknown tool: the
// positions in paths (each a tool's path, namespace first) of at most n
// tools whose dot-joined paths are within a third of wrong's length in
// edit distance, or whose last segment is wrong's last segment, nearest
// first.
func Suggest(wrong string, paths [][]string, n int) []int {
	type cand struct{ i, d int }
	var best []cand
	last := wrong
	if i := strings.LastIndex(wrong, "."); i >= 0 {
		last = wrong[i+1:]
	}
	limit := len(wrong)/3 + 1
	for i, p := range paths {
		if len(p) == 0 {
			continue
		}
		name := strings.Join(p, ".")
		d := len(wrong)
		if p[len(p)-1] == last {
			d = 0
		} else if len(wrong) <= maxSuggestName && abs(len(wrong)-len(name)) <= limit {
			d = editDistance(wrong, name)
		}
		if d > limit {
			continue
		}
		best = append(best, cand{i, d})
	}
	sort.SliceStable(best, func(a, b int) bool { return best[a].d < best[b].d })
	var out []int
	for i := 0; i < len(best) && i < n; i++ {
		out = append(out, best[i].i)
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
