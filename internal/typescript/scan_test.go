package typescript

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/evanw/esbuild/pkg/api"
)

// TestCheckAcceptsPrograms runs Check over programs that must compile:
// every conformance program and hand-picked shapes that are hard to
// tokenize (slashes, line ends, templates, TypeScript).
func TestCheckAcceptsPrograms(t *testing.T) {
	f, err := os.Open("../../testdata/conformance/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	n := 0
	for sc.Scan() {
		var c struct {
			ID   string `json:"id"`
			Code string `json:"code"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		if e := Check(c.Code); e != nil {
			t.Errorf("conformance case %s: Check = %v, want nil", c.ID, e)
		}
	}
	if n < 500 {
		t.Fatalf("read %d conformance programs, want the whole suite", n)
	}

	for name, code := range map[string]string{
		"division after paren":    "const a = 4, b = 2; return (a + b) / 2 + (a - b) / 2",
		"regex after if":          "const s = 'x)'; if (s) /\\)/.test(s); return 1",
		"regex with brackets":     "return [/[)}\\]]/.test('}'), /\\(/.source, /}/g.flags]",
		"regex after block":       "{ }\n/}/.test('}')\nreturn 1",
		"division after object":   "const x = { a: 1 }.a / 2; return x",
		"regex after return":      "return /a(b)c/.exec('abc')[1]",
		"regex after operators":   "const r = 1 > 0 ? /x/ : /y/; return [r.source, !/z/.test('z')]",
		"template nesting":        "const a = 1; return `a${`b${a}c${'}'}`}d` + `)`",
		"template with braces":    "return `{{${ {a: 1}.a }}}`",
		"comments":                "// })(); \n/* }) */ return 1 /* ( */",
		"html comments":           "const x = 1\n--> })(); a comment to the line end\nreturn x <!-- })();",
		"no semicolons":           strings.Repeat("x = a = b = c\n", 500) + "return 1",
		"statements after blocks": strings.Repeat("if (a) { b = c = d } else { e = f }\n", 300) + "return 1",
		"long else-if chain":      "let x = 0\n" + strings.Repeat("if (x === 1) { x = 2 } else ", 100) + "{ x = 3 }\nreturn x",
		"long method chain":       "return [3, 1, 2]" + strings.Repeat(".map((x) => x + 1).filter(Boolean)", 20),
		"typescript":              "interface P { id: string; tags?: Array<Map<string, number>> }\nconst f = <T,>(x: T): T => x\nconst p: P = { id: 'a' } as P\nreturn f<P>(p)!.id",
		"non-null then division":  "const a: number | undefined = 4\nreturn a! / 2",
		"postfix increment":       "let i = 0; i++ / 2; i-- / 2; return i",
		"string with brackets":    "return '})();' + \"(((\" + `]]]`",
		"line continuation":       "return 'a\\\nb'",
		"regex class with slash":  "return /[/]/.test('/')",
		"unicode identifiers":     "const café = 1, π = 2\nreturn café / π",
		"keyword property names":  "const o = { if: 1, return: 2 }; return o.if / o.return",
		"division by paren group": "const a = 6\nreturn (a)\n/ 2 / (1)",
		"await regex":             "return await /x/.test('x')",
		"async callbacks":         deepRealistic(),
	} {
		if e := Check(code); e != nil {
			t.Errorf("%s: Check = %v, want nil\n%s", name, e, code)
		}
	}
}

// deepRealistic is the most nested program a model plausibly writes:
// callbacks inside calls inside loops, three levels over.
func deepRealistic() string {
	inner := "const r = await tools.orders.lookup({ id: o.id, opts: { deep: { er: [1, [2, [3]]] } } });\n" +
		"if (r && r.items.length > 0) { for (const it of r.items) { if (it.price * it.qty > 100) { out.push({ id: it.id, total: it.price * it.qty }) } } }"
	body := inner
	for i := 0; i < 3; i++ {
		body = "await Promise.all(list.map(async (o) => {\n" + body + "\n}).filter((x) => x !== null));"
	}
	return "const out = [];\nconst list = [];\n" + body + "\nreturn out"
}

// TestCheckRefuses covers each way a program must be refused, including
// nesting hidden behind the slash ambiguity.
func TestCheckRefuses(t *testing.T) {
	deep := func(open, mid, close string, n int) string {
		return strings.Repeat(open, n) + mid + strings.Repeat(close, n)
	}
	const n = 100_000
	cases := []struct {
		name, code string
		want       string // in the message
	}{
		{"prefix operators", "let x: number = 1; return " + strings.Repeat("!", n) + "x", "nests more than 256"},
		{"typeof chain", "return " + strings.Repeat("typeof ", n) + "1", "nests more than 256"},
		{"parens", "return " + deep("(", "1", ")", n), "nests more than 256"},
		{"brackets", "return " + deep("[", "1", "]", n), "nests more than 256"},
		{"objects", "return " + deep("{a:", "1", "}", n), "nests more than"},
		{"templates", "return " + deep("`${", "1", "}`", n), "nests more than 256"},
		{"assignments", "let x; return " + strings.Repeat("x = ", n) + "1", "nests more than 256"},
		{"exponents", "return " + strings.Repeat("2 ** ", n) + "1", "nests more than 256"},
		{"conditionals", "return " + strings.Repeat("x ? 1 : ", n) + "0", "nests more than 256"},
		{"arrows", "return " + strings.Repeat("a => ", n) + "1", "nests more than 64 blocks"},
		{"member chain", "return x" + strings.Repeat(".b", n), "nests more than 256"},
		{"call chain", "return x" + strings.Repeat("()", n), "nests more than 256"},
		{"tagged templates", "return x" + strings.Repeat("``", n), "nests more than 256"},
		{"if chain", strings.Repeat("if (x) ", n) + ";", "nests more than 64 blocks"},
		{"blocks", deep("{", "", "}", n), "nests more than 64 blocks"},
		{"functions", deep("function f() {", "", "}", 100), "nests more than 64 blocks"},
		{"labels", strings.Repeat("a: ", n) + ";", "nests more than 256"},
		{"type arguments", "let y: " + deep("Array<", "number", ">", n) + " = []", "nests more than 256"},
		{"type assertions", "return " + strings.Repeat("<any>", n) + "x", "nests more than 256"},
		{"await chain", "return " + strings.Repeat("await ", n) + "1", "nests more than 256"},
		{"new chain", "return " + strings.Repeat("new ", n) + "X", "nests more than 256"},
		{"no semicolon continuation", "x = a\n" + strings.Repeat("? b = c\n", n) + ": 0", "nests more than 256"},
		// The slash ambiguity cannot hide depth: a reading that takes a
		// division for a regular expression (or the reverse) is followed
		// alongside the other.
		{"hidden after paren", "if (x) /'/; " + strings.Repeat("!", n) + "x; '", "nests more than 256"},
		{"hidden after brace", "x = {} / " + strings.Repeat("!", n) + "x / 1", "nests more than 256"},
		{"hidden after newline", "x = a\n/ " + strings.Repeat("!", n) + "x / 1", "nests more than 256"},
		{"hidden after keyword", "return await / " + strings.Repeat("(", 300) + "/", "nests more than 256"},
		{"wrapper break", "})(); globalThis.x = 1; (async () => {", "closes a bracket the program never opened"},
		{"wrapper break after an object", "x = {} /})(); globalThis.x = 1; (async () => { 1 /1", "closes a bracket the program never opened"},
		{"wrapper break in a reading", "f = function () {} /})(); globalThis.x = 1; (async () => { 1 /1", "closes a bracket the program never opened"},
		{"too large", "return '" + strings.Repeat("a", MaxProgramBytes) + "'", "the limit is 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			e := Check(c.code)
			if e == nil {
				t.Fatalf("Check = nil, want an error containing %q", c.want)
			}
			if !strings.Contains(e.Message, c.want) {
				t.Errorf("Check = %q, want it to contain %q", e.Message, c.want)
			}
			if e.Line == 0 && c.name != "too large" {
				t.Errorf("Check gave no location: %+v", e)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Check took %v", d) // linear time: milliseconds
			}
		})
	}
}

// TestCheckBoundsTranspiler feeds esbuild the deepest programs Check
// accepts, of every construct it counts: each must transform without
// taking the process down. (A stack overflow in esbuild is fatal, so a
// regression shows up as this test binary crashing.)
func TestCheckBoundsTranspiler(t *testing.T) {
	if testing.Short() {
		t.Skip("transforms 128 KiB programs")
	}
	shapes := map[string]func(n int) string{
		"prefix":   func(n int) string { return "let x: number = 1; void " + strings.Repeat("!", n) + "x;" },
		"parens":   func(n int) string { return "void " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + ";" },
		"members":  func(n int) string { return "void x" + strings.Repeat(".b", n) + ";" },
		"ternary":  func(n int) string { return "void (" + strings.Repeat("x ? 1 : ", n) + "0);" },
		"funcs":    func(n int) string { return strings.Repeat("function f() {", n) + strings.Repeat("}", n) },
		"else-ifs": func(n int) string { return strings.Repeat("if (x) x; else ", n) + ";" },
	}
	for name, shape := range shapes {
		t.Run(name, func(t *testing.T) {
			// The deepest accepted shape (in a block of its own), repeated
			// up to the size limit.
			ok := func(n int) bool {
				one := "{" + shape(n) + "}\n"
				return len(one) <= MaxTranspileBytes && Check(one) == nil
			}
			n := 1
			for ok(n * 2) {
				n *= 2
			}
			for step := n / 2; step > 0; step /= 2 {
				if ok(n + step) {
					n += step
				}
			}
			one := "{" + shape(n) + "}\n"
			code := strings.Repeat(one, max(1, MaxTranspileBytes/len(one)))
			if e := Check(code); e != nil {
				t.Fatalf("the repeated shape is refused: %v", e)
			}
			start := time.Now()
			res := api.Transform(header+code+footer, api.TransformOptions{Loader: api.LoaderTS, LogLimit: 1})
			t.Logf("%s: depth %d, %d bytes: esbuild %v, %d errors", name, n, len(code), time.Since(start), len(res.Errors))
		})
	}
}

// FuzzCheck: Check never panics, and a program it accepts stays inside
// its wrapper as esbuild parses it: esbuild's output is one wrapped
// function whose body closes nothing it did not open.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"return 1", "})(); x = 1; (async () => {", "x = {} /})(); y; (async () => { 1 /1",
		"f = function () {} /})(); y; (async () => { 1 /1", "if (x) /'/; !!x; '", "a\n/ b / c",
		"return `${`${'}'}`}`", "x <!-- })();\n--> })();\nreturn 1", "let x: Array<number> = []; return x!.length / 2",
		"return await / 1 /", "}", "{", "/*", "`${", "return /[/]/.test('/')", "label: { break label }",
		strings.Repeat("(", 300) + strings.Repeat(")", 300), strings.Repeat("function f() {", 70) + strings.Repeat("}", 70),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		if Check(code) != nil || len(code) > MaxTranspileBytes || strings.TrimSpace(code) == "" {
			return
		}
		p, err := transform(code, false)
		if err != nil {
			return // a syntax error: esbuild stopped there
		}
		body, ok := strings.CutPrefix(p.Script, "(async () => {")
		if ok {
			body, ok = strings.CutSuffix(body, "})();\n")
		}
		if !ok {
			t.Fatalf("esbuild's output is not one wrapped function:\n%s", p.Script)
		}
		if e := Check(body); e != nil && strings.Contains(e.Message, "never opened") {
			t.Fatalf("the program closes its wrapper, and Check accepted it:\n%s", code)
		}
	})
}
