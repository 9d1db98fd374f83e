package tsgen

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkShape asserts what every rendering must satisfy, whatever the
// schema: a non-empty result, one line in the one-line form, and in the
// pretty form two-space indentation and no trailing whitespace.
func checkShape(t *testing.T, origin, line, pretty string) {
	t.Helper()
	if line == "" || pretty == "" {
		t.Fatalf("%s: empty rendering", origin)
	}
	if strings.ContainsAny(line, "\n\r") {
		t.Fatalf("%s: one-line form has a line break: %q", origin, line)
	}
	for _, l := range strings.Split(pretty, "\n") {
		if strings.TrimRight(l, " \t") != l {
			t.Fatalf("%s: trailing whitespace in %q", origin, l)
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		// JSDoc block lines sit one space past an even indent.
		if strings.HasPrefix(strings.TrimLeft(l, " "), "*") {
			indent--
		}
		if indent%2 != 0 {
			t.Fatalf("%s: odd indentation in %q", origin, l)
		}
	}
}

func TestGeneratedSchemasKeepShape(t *testing.T) {
	g := newSchemaGen(2)
	for i := 0; i < 3000; i++ {
		doc := g.document()
		origin := fmt.Sprintf("schema %d %s", i, doc)
		line, pretty := Type(doc, false), Type(doc, true)
		checkShape(t, origin, line, pretty)
		if again := Type(doc, true); again != pretty {
			t.Fatalf("%s: rendering is not deterministic", origin)
		}
		sig := Signature(g.path(), g.pick(genDocs), nil, doc, doc, true)
		checkShape(t, origin, Signature([]string{"a"}, "", nil, doc, doc, false), sig)
	}
}

func TestWrongKeywordTypesRenderSomething(t *testing.T) {
	values := []string{`5`, `"x"`, `null`, `true`, `false`, `[]`, `[1, "a", null]`, `{}`, `{"a": 5}`, `-1`, `1e999`}
	keywords := []string{
		"type", "properties", "required", "items", "prefixItems", "additionalItems",
		"additionalProperties", "patternProperties", "unevaluatedProperties", "enum", "const",
		"anyOf", "oneOf", "allOf", "$ref", "nullable", "description", "title", "default",
		"deprecated", "format", "pattern", "minItems", "minimum", "exclusiveMinimum",
	}
	for _, k := range keywords {
		for _, v := range values {
			for _, typ := range []string{"", `"type": "object", `, `"type": "array", `} {
				s := fmt.Sprintf(`{%s"properties": {"p": {%s%q: %s}}, %q: %s}`, typ, typ, k, v, k, v)
				checkShape(t, s, Type([]byte(s), false), Type([]byte(s), true))
			}
		}
	}
}

func TestMalformedInput(t *testing.T) {
	for _, s := range []string{"", " ", "{", `{"type": "string"`, `{"a": 1}}`, "nul", "\xff", `{"type": "string"} {}`, `[1,]`} {
		if got := Type([]byte(s), true); got != "unknown" {
			t.Errorf("Type(%q) = %q, want unknown", s, got)
		}
	}
	want := "tools.a(input?: Record<string, unknown>): Promise<unknown>"
	if got := Signature([]string{"a"}, "", nil, []byte("{bad"), []byte("{bad"), false); got != want {
		t.Errorf("Signature with malformed schemas = %q, want %q", got, want)
	}
}

// within fails the test when f takes longer than a generous bound, which
// only a missing budget could exceed.
func within(t *testing.T, what string, f func() string) string {
	t.Helper()
	start := time.Now()
	out := f()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("%s took %s", what, d)
	}
	return out
}

func TestExpansionBudget(t *testing.T) {
	// Each definition refers to the next one twice, so expanding D0 fully
	// would take 2^31 expansions.
	var b strings.Builder
	b.WriteString(`{"$ref": "#/$defs/D0", "$defs": {`)
	const n = 30
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `"D%d": {"anyOf": [{"$ref": "#/$defs/D%d"}, {"$ref": "#/$defs/D%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"D%d": {"type": "string"}}}`, n)
	root, ok := parse([]byte(b.String()))
	if !ok {
		t.Fatal("test schema does not parse")
	}
	r := newRenderer(root)
	got := within(t, "diamond", func() string { return format(r.schema(root, 0), false) })
	if r.expansions != maxExpansions {
		t.Errorf("expansions = %d, want the budget %d", r.expansions, maxExpansions)
	}
	// Past the budget references become unknown, which absorbs the union.
	if got != "unknown" {
		t.Errorf("got %q, want unknown", got)
	}

	// A short diamond fits the budget and renders completely.
	short := `{"$ref": "#/$defs/D0", "$defs": {"D0": {"anyOf": [{"$ref": "#/$defs/D1"}, {"$ref": "#/$defs/D1"}]}, "D1": {"type": "string"}}}`
	if got := Type([]byte(short), false); got != "string" {
		t.Errorf("short diamond = %q, want string", got)
	}
}

func TestVisitBudget(t *testing.T) {
	// Wide definitions referenced from many places: the output would be
	// 200 expansions of 400 properties each without the visit budget.
	var b strings.Builder
	b.WriteString(`{"$defs": {"Wide": {"type": "object", "properties": {`)
	for i := 0; i < 400; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d": {"type": "string"}`, i)
	}
	b.WriteString(`}}}, "type": "object", "properties": {`)
	for i := 0; i < 300; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"w%d": {"$ref": "#/$defs/Wide"}`, i)
	}
	b.WriteString(`}}`)
	root, _ := parse([]byte(b.String()))
	r := newRenderer(root)
	out := within(t, "wide", func() string { return format(r.schema(root, 0), true) })
	if r.visits > maxVisits {
		t.Errorf("visits = %d, over the budget %d", r.visits, maxVisits)
	}
	if len(out) > 2<<20 {
		t.Errorf("output is %d bytes", len(out))
	}
	if !strings.Contains(out, "w299?: unknown") {
		t.Error("properties past the budget should render as unknown")
	}
}

func TestDeepDocuments(t *testing.T) {
	cases := map[string]string{
		// Past encoding/json's nesting limit: malformed.
		"arrays": strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
		// Composition without structure: stopped by the nesting limit.
		"anyOf": strings.Repeat(`{"anyOf": [`, 4000) + `{"type": "string"}` + strings.Repeat("]}", 4000),
		// Structure: stopped by the depth cap.
		"objects": strings.Repeat(`{"properties": {"a": `, 3000) + "true" + strings.Repeat("}}", 3000),
		"items":   strings.Repeat(`{"items": `, 9000) + "true" + strings.Repeat("}", 9000),
	}
	for name, s := range cases {
		out := within(t, name, func() string { return Type([]byte(s), true) })
		checkShape(t, name, Type([]byte(s), false), out)
		if len(out) > 4096 {
			t.Errorf("%s: %d bytes of output", name, len(out))
		}
	}
}

func TestDepthCap(t *testing.T) {
	nest := func(levels int) string {
		return strings.Repeat(`{"type": "array", "items": `, levels) + `{"type": "string"}` + strings.Repeat("}", levels)
	}
	if got, want := Type([]byte(nest(maxDepth)), false), strings.Repeat("Array<", maxDepth)+"string"+strings.Repeat(">", maxDepth); got != want {
		t.Errorf("%d levels = %q, want %q", maxDepth, got, want)
	}
	if got, want := Type([]byte(nest(maxDepth+1)), false), strings.Repeat("Array<", maxDepth)+"unknown"+strings.Repeat(">", maxDepth); got != want {
		t.Errorf("%d levels = %q, want %q", maxDepth+1, got, want)
	}
}

func TestAccessPath(t *testing.T) {
	cases := map[string][]string{
		`tools`:                                 nil,
		`tools.a.b`:                             {"a", "b"},
		`tools.$codemode.search`:                {"$codemode", "search"},
		`tools["my-ns"].x`:                      {"my-ns", "x"},
		`tools.context7["resolve-library-id"]`:  {"context7", "resolve-library-id"},
		`tools["2nd"]["a b"][""].default`:       {"2nd", "a b", "", "default"},
		`tools["quote\"d"]["</script>"]["é"]._`: {`quote"d`, "</script>", "é", "_"},
		// What does not show as itself is spelled out, and still names
		// the same property in JavaScript.
		`tools.ns["ref\u200bund"]`:                         {"ns", "ref\u200bund"},
		`tools.ns["refund\u202e"]`:                         {"ns", "refund\u202e"},
		`tools["\u2066ns\u2069"].x`:                        {"\u2066ns\u2069", "x"},
		`tools.ns["\uff52\uff45\uff46\uff55\uff4e\uff44"]`: {"ns", "ｒｅｆｕｎｄ"},
		`tools.ns["a\u2028b\nc"]`:                          {"ns", "a\u2028b\nc"},
		`tools.ns["\ufeffx\u00ad"]`:                        {"ns", "\ufeffx\u00ad"},
	}
	for want, path := range cases {
		if got := AccessPath(path); got != want {
			t.Errorf("AccessPath(%q) = %s, want %s", path, got, want)
		}
	}
}

// TestNamesSpelledOut: a property name or string literal that does not
// show as itself is escaped in the rendered type, so the model reads what
// the schema holds; an ordinary non-ASCII one is kept.
func TestNamesSpelledOut(t *testing.T) {
	for _, tc := range []struct {
		schema, want string
	}{
		{`{"type":"object","properties":{"ref\u200bund":{"type":"string"}},"required":["ref\u200bund"]}`, `{ "ref\u200bund": string }`},
		{`{"type":"object","properties":{"ｉｄ":{"type":"string"}},"required":["ｉｄ"]}`, `{ "\uff49\uff44": string }`},
		{`{"enum":["refund\u202e","ok"]}`, `"refund\u202e" | "ok"`},
		{`{"const":"名前"}`, `"名前"`},
	} {
		if got := Type(json.RawMessage(tc.schema), false); got != tc.want {
			t.Errorf("Type(%s) = %s, want %s", tc.schema, got, tc.want)
		}
	}
}

func TestDocText(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  \n\t\n", nil},
		{"a */ b", []string{`a *\/ b`}},
		{"*\x00/", []string{`*\/`}},
		{"a\r\nb\rc\u2028d", []string{"a", "b", "c", "d"}},
		{"x  \n\n\n\ny\t", []string{"x", "", "y"}},
		{"bell\a\x1b[0m\u0085end", []string{"bell[0mend"}},
		{"bad \xff utf8", []string{"bad \uFFFD utf8"}},
	}
	for _, c := range cases {
		got := docText(c.in)
		if fmt.Sprint(got) != fmt.Sprint(c.want) || len(got) != len(c.want) {
			t.Errorf("docText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// Renders share nothing but immutable keyword nodes; the race detector
// checks that claim here.
func TestConcurrentRenders(t *testing.T) {
	g := newSchemaGen(3)
	docs := make([][]byte, 50)
	want := make([]string, len(docs))
	for i := range docs {
		docs[i] = g.document()
		want[i] = Type(docs[i], true)
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, d := range docs {
				if got := Type(d, true); got != want[i] {
					t.Errorf("concurrent render of %s differs", d)
				}
			}
		}()
	}
	wg.Wait()
}
