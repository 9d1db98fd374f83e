package codemode

import (
	"encoding/json"
	"fmt"
	"math"
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
// honoured only within the host's limits. Codex's JSON form is read too:
// {"yield_time_ms": 1000, "max_output_tokens": 2000}, tokens counted as
// BytesPerToken bytes. The line is a comment, so
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
	rest := strings.TrimSpace(strings.TrimPrefix(first, pragmaPrefix))
	if strings.HasPrefix(rest, "{") {
		return codexPragma(rest)
	}
	var p Pragma
	for _, f := range strings.Fields(rest) {
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

// BytesPerToken converts codex's max_output_tokens to an output budget
// in bytes: about four bytes of English or JSON per token, as the
// tokenizers of the models that write such pragmas average.
const BytesPerToken = 4

// codexPragma reads codex's JSON form of the pragma,
//
//	// @exec: {"yield_time_ms": 1000, "max_output_tokens": 2000}
//
// which models trained on codex write: yield_time_ms is Yield, and
// max_output_tokens times BytesPerToken is OutputBytes.
func codexPragma(src string) (Pragma, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal([]byte(src), &in); err != nil {
		return Pragma{}, fmt.Errorf("the pragma's JSON does not parse (%v); write {\"yield_time_ms\": 1000, \"max_output_tokens\": 2000} or yield=1s output=8000", err)
	}
	var p Pragma
	for k, v := range in {
		var n int64
		if err := json.Unmarshal(v, &n); err != nil || n < 0 {
			return Pragma{}, fmt.Errorf("%s=%s is not a whole number of at least 0", k, v)
		}
		switch k {
		case "yield_time_ms":
			p.Yield = time.Duration(n) * time.Millisecond
		case "max_output_tokens":
			if n > math.MaxInt32/BytesPerToken {
				n = math.MaxInt32 / BytesPerToken
			}
			p.OutputBytes = int(n) * BytesPerToken
		default:
			return Pragma{}, fmt.Errorf("unknown setting %q: the JSON pragma takes yield_time_ms and max_output_tokens", k)
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
