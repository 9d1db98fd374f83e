package codemode

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/codemode-go/codemode/internal/discovery"
	"github.com/google/jsonschema-go/jsonschema"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/<name>, or rewrites it with -update.
// A missing golden fails.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden %s (run go test -run %s -update): %v", path, t.Name(), err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func schema(t *testing.T, s string) *jsonschema.Schema {
	t.Helper()
	var sc jsonschema.Schema
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		t.Fatalf("schema %s: %v", s, err)
	}
	return &sc
}

func nop(context.Context, json.RawMessage) (any, error) { return nil, nil }

// shopTools is a small catalog with descriptions and input properties for
// the discovery goldens.
func shopTools(t *testing.T) Tools {
	tool := func(desc, in, out string) Tool {
		tl := Tool{Description: desc, Run: nop}
		if in != "" {
			tl.Input = schema(t, in)
		}
		if out != "" {
			tl.Output = schema(t, out)
		}
		return tl
	}
	return Tools{
		"orders": Tools{
			"list":   tool("List orders, newest first.\nPaginated by cursor.", `{"type":"object","properties":{"status":{"enum":["open","shipped"],"description":"Only orders in this state."},"cursor":{"type":"string"}}}`, `{"type":"object","properties":{"orders":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"}}}},"next":{"type":["string","null"]}},"required":["orders"]}`),
			"lookup": tool("Look up one order by id.", `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`, ""),
			"refund": tool("Refund an order, fully or partly.", `{"type":"object","properties":{"id":{"type":"string"},"amountCents":{"type":"integer","minimum":1,"description":"Amount to refund; the whole order when absent."}},"required":["id"]}`, ""),
		},
		"customers": Tools{
			"getCustomer":     tool("Get a customer profile.", `{"type":"object","properties":{"customerId":{"type":"string"}},"required":["customerId"]}`, ""),
			"searchCustomers": tool("Find customers by name or email.", `{"type":"object","properties":{"query":{"type":"string"}}}`, ""),
			"addresses":       tool("List a customer's shipping addresses.", `{"type":"object","properties":{"customerId":{"type":"string"}}}`, ""),
		},
		"context7": Tools{
			"resolve-library-id": tool("Resolve a package name to a library id.", `{"type":"object","properties":{"libraryName":{"type":"string"}},"required":["libraryName"]}`, ""),
			"get-library-docs":   tool("Fetch documentation for a library id.", `{"type":"object","properties":{"id":{"type":"string"},"topic":{"type":"string"}}}`, ""),
		},
	}
}

func TestInstructionsGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"complete", Options{Tools: shopTools(t), Timeout: 30e9, MaxToolCalls: 50}},
		{"partial", Options{Tools: shopTools(t), CatalogBudget: 120}},
		{"empty", Options{}},
		{"none", Options{Tools: shopTools(t), CatalogBudget: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := mustNew(t, tc.opts)
			golden(t, "discovery/instructions-"+tc.name+".md", rt.Instructions())
		})
	}
}

// TestInstructionsInlineSignatures: the inline catalog shows each tool's
// complete signature, with its JSDoc (field descriptions and
// constraints), and charges all of it to the budget: the budget that
// holds every full signature lists all of them, one token less says how
// many are listed.
func TestInstructionsInlineSignatures(t *testing.T) {
	rt := mustNew(t, Options{Tools: shopTools(t)})
	all := 0
	for _, e := range rt.Catalog() {
		all += discovery.EstimateTokens(e.Signature)
	}
	for _, tc := range []struct {
		name   string
		budget int
		want   []string
	}{
		{"default", 0, []string{"All 8 tools are listed below.", "Amount to refund; the whole order when absent.", "@minimum 1", "/** Look up one order by id. */\ntools.orders.lookup(input: {"}},
		{"exactly enough", all, []string{"All 8 tools are listed below."}},
		{"one token short", all - 1, []string{"7 of 8 tools are listed below."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ins := mustNew(t, Options{Tools: shopTools(t), CatalogBudget: tc.budget}).Instructions()
			for _, w := range tc.want {
				if !strings.Contains(ins, w) {
					t.Errorf("instructions lack %q; got\n%s", w, ins[strings.Index(ins, "## Available tools"):])
				}
			}
		})
	}
}

// TestCatalogBudgetNone: a negative budget inlines no signature, and the
// instructions send the model to search instead.
func TestCatalogBudgetNone(t *testing.T) {
	rt, err := New(Options{Tools: shopTools(t), CatalogBudget: -1})
	if err != nil {
		t.Fatalf("New with CatalogBudget -1: got %v, want no error", err)
	}
	defer rt.Close()
	ins := rt.Instructions()
	for _, tc := range []struct {
		name, text string
		want       bool
	}{
		{"no signature", "tools.orders.refund(", false},
		{"no code block", "```ts", false},
		{"counts", "0 of 8 tools are listed below.", true},
		{"search first", "search before you guess", true},
		{"namespaces", "### orders (3 tools, none shown)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Contains(ins, tc.text); got != tc.want {
				t.Errorf("instructions contain %q: got %v, want %v", tc.text, got, tc.want)
			}
		})
	}
}

func TestSearchGolden(t *testing.T) {
	rt := mustNew(t, Options{Tools: shopTools(t)})
	var out bytes.Buffer
	for _, q := range []struct {
		query, namespace string
		limit, offset    int
	}{
		{"order", "", 10, 0},
		{"refund order", "", 10, 0},
		{"customer addresses", "", 10, 0}, // "addresses" also tries "address", "customers" -> "customer"
		{"searchCustomers", "", 10, 0},    // camelCase splits into "search" "customers"
		{"library docs", "", 10, 0},
		{"orders.lookup", "", 10, 0},                        // exact path
		{"tools.orders.lookup", "", 10, 0},                  // tools.-prefixed
		{`tools.context7["resolve-library-id"]`, "", 10, 0}, // bracket expression
		{"", "customers", 10, 0},                            // browse a namespace
		{"*", "", 3, 0},                                     // browse, first page
		{"", "", 3, 3},                                      // second page
		{"", "", 3, 6},                                      // last page
		{"zebra", "", 10, 0},                                // nothing matches
		{"ord", "", 10, 0},                                  // part of a word
		{"ship", "", 10, 0},                                 // part of a word in a description
		{"get customer", "", 10, 0},                         // the tool's name spelled out
	} {
		res := rt.Search(SearchRequest{Query: q.query, Namespace: q.namespace, Limit: q.limit, Offset: q.offset})
		var paths []string
		for _, it := range res.Items {
			paths = append(paths, it.Path)
		}
		next := "null"
		if res.Next != nil {
			next = `{"offset":` + itoa(res.Next.Offset) + `}`
		}
		out.WriteString("query=" + q.query + " namespace=" + q.namespace + " limit=" + itoa(q.limit) + " offset=" + itoa(q.offset) + "\n")
		out.WriteString("  items: " + strings.Join(paths, ", ") + "\n")
		out.WriteString("  remaining: " + itoa(res.Remaining) + " next: " + next + "\n")
	}
	golden(t, "discovery/search.txt", out.String())
	// One full item, with its signature.
	res := rt.Search(SearchRequest{Query: "orders.refund"})
	b, _ := json.MarshalIndent(res, "", "  ")
	golden(t, "discovery/search-item.json", string(b)+"\n")
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestSearchAsTool(t *testing.T) {
	rt := mustNew(t, Options{Tools: shopTools(t), MaxToolCalls: 3})
	res := run(t, rt, `const r = await tools.$codemode.search({ query: "refund" })
		const page = await tools.$codemode.search({ limit: 2 })
		const more = await tools.$codemode.search({ limit: 2, ...page.next })
		return [r.items[0].path, r.items[0].signature.includes("amountCents"), page.items.length, more.items[0].path !== page.items[0].path]`)
	if string(res.Value) != `["tools.orders.refund",true,2,true]` || len(res.ToolCalls) != 3 || res.ToolCalls[0].Name != "$codemode.search" {
		t.Errorf("got %s", resultJSON(res))
	}
	res = run(t, rt, `return await tools.$codemode.search({ limit: 1000 })`)
	if res.OK || res.Error.Kind != InvalidToolInput {
		t.Errorf("bad limit: %s", resultJSON(res))
	}
}

// TestSearchItemPath: a search item gives the tool's call site, as a
// program writes it, and searching for either spelling of a path (the
// call site or the dot-joined audit name) finds exactly that tool.
func TestSearchItemPath(t *testing.T) {
	rt := mustNew(t, Options{Tools: shopTools(t)})
	for _, tc := range []struct{ query, want string }{
		{"refund", "tools.orders.refund"},
		{"resolve library", `tools.context7["resolve-library-id"]`},
		{"tools.orders.refund", "tools.orders.refund"},
		{"orders.refund", "tools.orders.refund"},
		{`tools.context7["resolve-library-id"]`, `tools.context7["resolve-library-id"]`},
		{`context7["resolve-library-id"]`, `tools.context7["resolve-library-id"]`},
		{"context7.resolve-library-id", `tools.context7["resolve-library-id"]`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			res := rt.Search(SearchRequest{Query: tc.query})
			if len(res.Items) == 0 || res.Items[0].Path != tc.want {
				t.Fatalf("items got %q, want %s first", itemPaths(res), tc.want)
			}
			// The path an item gives is a query that finds it alone.
			again := rt.Search(SearchRequest{Query: res.Items[0].Path})
			if got := itemPaths(again); len(got) != 1 || got[0] != tc.want {
				t.Errorf("searching %s got %q, want exactly that tool", res.Items[0].Path, got)
			}
		})
	}
}

func itemPaths(res SearchResult) []string {
	var out []string
	for _, it := range res.Items {
		out = append(out, it.Path)
	}
	return out
}

// TestInstructionsNoBareLabels: outside code, every line of the
// instructions is a heading, a list item or a sentence: a lone word such
// as a status label reads to a model as noise or as a command.
func TestInstructionsNoBareLabels(t *testing.T) {
	for name, opts := range map[string]Options{
		"complete": {Tools: shopTools(t)},
		"partial":  {Tools: shopTools(t), CatalogBudget: 50},
		"none":     {Tools: shopTools(t), CatalogBudget: -1},
		"no tools": {},
	} {
		t.Run(name, func(t *testing.T) {
			code := false
			for _, line := range strings.Split(mustNew(t, opts).Instructions(), "\n") {
				if strings.HasPrefix(line, "```") {
					code = !code
					continue
				}
				l := strings.TrimSpace(line)
				if code || l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "- ") || regexp.MustCompile(`^\d+\. `).MatchString(l) {
					continue
				}
				if !strings.ContainsAny(l, " ") || !strings.ContainsAny(l[len(l)-1:], ".:!?)") {
					t.Errorf("got a line that is not a sentence: %q", line)
				}
			}
		})
	}
}
