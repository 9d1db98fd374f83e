package codemode

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Pragma is what a program may ask of its own run on its first line:
//
//	// @exec: yield=5s output=8000
//
// yield is how long the caller waits before it gets a cell id back and the
// program goes on (codemode mcp's execute with cells enabled; a duration,
// or milliseconds); output lowers the run's output budget (bytes). Both are
// honoured only within the host's limits. The line is a comment, so
// positions in diagnostics stay those of the program as written.
type Pragma struct {
	Yield       time.Duration
	OutputBytes int
}

const pragmaPrefix = "// @exec:"

// ParsePragma reads a program's pragma. A program without one gives the
// zero Pragma; a malformed one gives an error that says what is wrong.
func ParsePragma(code string) (Pragma, error) {
	first, _, _ := strings.Cut(strings.TrimLeft(code, " \t\r\n\ufeff"), "\n")
	first = strings.TrimSpace(first)
	if !strings.HasPrefix(first, pragmaPrefix) {
		return Pragma{}, nil
	}
	var p Pragma
	for _, f := range strings.Fields(strings.TrimPrefix(first, pragmaPrefix)) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return Pragma{}, fmt.Errorf("%q is not KEY=VALUE (yield=5s, output=8000)", f)
		}
		switch k {
		case "yield":
			d, err := time.ParseDuration(v)
			if err != nil {
				ms, merr := strconv.Atoi(v)
				if merr != nil {
					return Pragma{}, fmt.Errorf("yield=%s is not a duration (5s, 1500ms)", v)
				}
				d = time.Duration(ms) * time.Millisecond
			}
			if d < 0 {
				return Pragma{}, fmt.Errorf("yield=%s is negative", v)
			}
			p.Yield = d
		case "output":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return Pragma{}, fmt.Errorf("output=%s is not a number of bytes", v)
			}
			p.OutputBytes = n
		default:
			return Pragma{}, fmt.Errorf("unknown setting %q: the pragma takes yield and output", k)
		}
	}
	return p, nil
}

// pragmaLine is the line of the pragma (blank lines may come first).
func pragmaLine(code string) int {
	line := 1
	for _, r := range code {
		switch r {
		case '\n':
			line++
		case ' ', '\t', '\r', '\ufeff':
		default:
			return line
		}
	}
	return line
}
