package tsgen

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func namedDefs(ref string) (string, bool) {
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return "", false
	}
	return TypeName(name), true
}

func TestRenderNamed(t *testing.T) {
	in := json.RawMessage(`{"type":"object","properties":{"customer":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/customer"}]}},"required":["customer"]}`)
	out := json.RawMessage(`{"$ref":"#/$defs/issue-event"}`)
	r := Render([]string{"ns", "get"}, "Gets.", nil, in, out, Options{Named: namedDefs})
	want := "/** Gets. */\ntools.ns.get(input: {\n  customer: string | Customer;\n}): Promise<IssueEvent>"
	if r.Text != want {
		t.Errorf("got\n%s\nwant\n%s", r.Text, want)
	}
	if got := fmt.Sprint(r.Uses); got != "[Customer IssueEvent]" {
		t.Errorf("Uses = %s", got)
	}
}

func TestRenderCuts(t *testing.T) {
	// A wide object of nested objects, well past a small bound.
	var props []string
	for i := range 30 {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"object","description":"Field %d of many.","properties":{"a":{"type":"string"},"b":{"type":"object","properties":{"c":{"type":"number"},"d":{"type":"string"}}}}}`, i, i))
	}
	in := json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`)
	r := Render([]string{"ns", "big"}, "", nil, in, nil, Options{MaxSize: 1000, Parts: "NsBig"})
	if len(r.Text) > 1000 {
		t.Errorf("text is %d bytes, want at most 1000:\n%s", len(r.Text), r.Text)
	}
	if len(r.Parts) == 0 {
		t.Fatal("no parts")
	}
	for _, p := range r.Parts {
		// A part that is one wide object has nothing left to cut.
		if len(p.Text) > 1000 && strings.Count(p.Text, "{") > 1 {
			t.Errorf("part %s is %d bytes", p.Name, len(p.Text))
		}
		if !strings.Contains(p.Name, "_") {
			t.Errorf("part name %q has no _", p.Name)
		}
	}
	if r.Text != "tools.ns.big(input?: NsBig_Input): Promise<unknown>" {
		t.Errorf("got %s", r.Text)
	}
}

func TestPlainText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"<p>Creates a <b>customer</b>.</p><p>See <a href=\"/docs\">docs</a> &amp; more.</p>", "Creates a customer.\n\nSee docs & more."},
		{"Use **bold** and [the guide](https://x.test/g).\n## Heading\ntext", "Use bold and the guide (https://x.test/g).\nHeading\ntext"},
		{"<ul><li>one</li><li>two</li></ul>", "- one\n\n- two"},
		{"plain text, unchanged", "plain text, unchanged"},
		{strings.Repeat("word ", 100), strings.TrimSpace(strings.Repeat("word ", 38)) + cutMarker},
	} {
		if got := plainText(c.in, 200); got != c.want {
			t.Errorf("plainText(%q)\ngot  %q\nwant %q", c.in, got, c.want)
		}
	}
}
