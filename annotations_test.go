package codemode

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestAnnotationsInSignaturesAndInstructions(t *testing.T) {
	run := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	rt := mustNew(t, Options{Tools: Tools{"files": Tools{
		"read":   Tool{Description: "Read a file.", Run: run, Annotations: &Annotations{ReadOnly: true, Idempotent: true}},
		"remove": Tool{Description: "Remove a file.", Run: run, Annotations: &Annotations{Destructive: true, Idempotent: true}},
		"upload": Tool{Description: "Upload a file.", Run: run, Annotations: &Annotations{OpenWorld: true}},
		"touch":  Tool{Description: "Touch a file.", Run: run},
	}}})
	sigs := map[string]CatalogEntry{}
	for _, e := range rt.Catalog() {
		sigs[e.Path] = e
	}
	for path, want := range map[string]string{
		"files.read":   "@readonly\n */", // read-only says idempotent already
		"files.remove": "@destructive\n * @idempotent\n */",
		"files.upload": "@openworld\n */",
		"files.touch":  "/** Touch a file. */",
	} {
		if !strings.Contains(sigs[path].Signature, want) {
			t.Errorf("%s: signature\n%s\nwants %q", path, sigs[path].Signature, want)
		}
	}
	if sigs["files.remove"].Annotations == nil || !sigs["files.remove"].Annotations.Destructive || sigs["files.touch"].Annotations != nil {
		t.Errorf("catalog annotations: %+v %+v", sigs["files.remove"].Annotations, sigs["files.touch"].Annotations)
	}
	if in := rt.Instructions(); !strings.Contains(in, "`@destructive` delete or overwrite") || !strings.Contains(in, " * @readonly") {
		t.Errorf("the instructions do not explain or show the tags:\n%s", in)
	}
	plain := mustNew(t, Options{Tools: Tools{"files": Tools{"touch": Tool{Run: run}}}})
	if strings.Contains(plain.Instructions(), "@readonly") {
		t.Error("instructions explain tags no tool has")
	}
	// (tsgen's tests run tsc over signatures with tags.)
	got, _ := json.Marshal(sigs["files.remove"])
	if !strings.Contains(string(got), `"annotations":{"destructive":true,"idempotent":true}`) {
		t.Errorf("catalog JSON %s", got)
	}
}

// TestAnnotationsStricterClaimHolds: a tool that claims to be both
// read-only and destructive is shown as destructive (and idempotent when
// it says so), never as read-only: when the claims disagree, the one that
// asks for more care holds.
func TestAnnotationsStricterClaimHolds(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    *Annotations
		want []string
	}{
		{"none", nil, nil},
		{"read-only", &Annotations{ReadOnly: true}, []string{"@readonly"}},
		{"read-only and idempotent", &Annotations{ReadOnly: true, Idempotent: true}, []string{"@readonly"}},
		{"destructive", &Annotations{Destructive: true}, []string{"@destructive"}},
		{"both", &Annotations{ReadOnly: true, Destructive: true}, []string{"@destructive"}},
		{"both, idempotent", &Annotations{ReadOnly: true, Destructive: true, Idempotent: true}, []string{"@destructive", "@idempotent"}},
		{"both, open world", &Annotations{ReadOnly: true, Destructive: true, OpenWorld: true}, []string{"@destructive", "@openworld"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.tags(); !slices.Equal(got, tc.want) {
				t.Errorf("got tags %q, want %q", got, tc.want)
			}
		})
	}
	// Through the catalog too: the signature a model reads.
	run := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	rt := mustNew(t, Options{Tools: Tools{"orders": Tools{
		"purge": Tool{Description: "Purge orders.", Run: run, Annotations: &Annotations{ReadOnly: true, Destructive: true}},
	}}})
	sig := rt.Catalog()[0].Signature
	if !strings.Contains(sig, "@destructive") || strings.Contains(sig, "@readonly") {
		t.Errorf("got signature\n%s\nwant it tagged @destructive and not @readonly", sig)
	}
}
