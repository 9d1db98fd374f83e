package codemode

import (
	"context"
	"encoding/json"
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
