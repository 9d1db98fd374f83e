package cli

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Usage errors say what is wrong in one line, propose the nearest name
// when a command or flag is misspelt, and point to the help, which is
// printed in full only when asked for (-h): sixty lines of flags bury the
// one that matters.

// commands are the top-level commands, for suggestions.
var commands = []string{"run", "resume", "catalog", "instructions", "search", "demo", "mcp", "login", "serve", "worker", "nodes", "drain", "bench", "engine", "version", "help"}

// unknownCommand reports a command that does not exist.
func unknownCommand(stderr io.Writer, prefix, name string, known []string, help string) int {
	fmt.Fprintf(stderr, "%s: unknown command %q%s\n", prefix, name, didYouMean(name, known, ""))
	fmt.Fprintf(stderr, "Run %q for the commands.\n", help)
	return exitUsage
}

// usageFailed reports a usage error of a command in one line and points
// to its help.
func usageFailed(stderr io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n", cmd, fmt.Sprintf(format, args...))
	fmt.Fprintf(stderr, "Run \"%s -h\" for its usage and flags.\n", cmd)
	return exitUsage
}

// The flag package's messages, rewritten in the command's terms.
var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	missingValue  = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	invalidValue  = regexp.MustCompile(`^invalid (boolean )?value "(.*)" for (?:flag )?-+([^:]*): (.*)$`)
)

// flagFailed reports an error of fs.Parse (other than -h): one line,
// with the flag spelt as the help spells it and, for an unknown flag, the
// nearest one.
func flagFailed(stderr io.Writer, fs *flag.FlagSet, err error) int {
	msg := err.Error()
	switch m := undefinedFlag.FindStringSubmatch(msg); {
	case m != nil:
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		name, _, _ := strings.Cut(m[1], "=")
		msg = fmt.Sprintf("unknown flag --%s%s", name, didYouMean(name, names, "--"))
	case missingValue.MatchString(msg):
		msg = fmt.Sprintf("--%s needs a value", missingValue.FindStringSubmatch(msg)[1])
	case invalidValue.MatchString(msg):
		m := invalidValue.FindStringSubmatch(msg)
		why := m[4]
		if m[1] != "" {
			why = "want true or false, as in --" + m[3] + "=false"
		}
		msg = fmt.Sprintf("--%s %s: %s", m[3], m[2], why)
	}
	return usageFailed(stderr, fs.Name(), "%s", msg)
}

// didYouMean is "; did you mean --timeout?" for the known name nearest
// to wrong, or "" when none is near.
func didYouMean(wrong string, known []string, prefix string) string {
	best, bestD := "", 0
	for _, k := range known {
		d := editDistance(strings.ToLower(wrong), strings.ToLower(k))
		if strings.HasPrefix(k, wrong) && len(wrong) >= 3 {
			d = min(d, 1) // a name cut short: --suspend for --suspend-dir
		}
		if best == "" || d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || bestD > max(1, len([]rune(wrong))/3) {
		return ""
	}
	return fmt.Sprintf("; did you mean %s%s?", prefix, best)
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
