package codemode

import (
	"context"
	"strings"
	"testing"
)

// TestNewToolSlicesAreArrays: a Go slice reads as an array in a NewTool
// tool's signature, not null | Array, and a nil slice comes back as [],
// so the signature holds.
func TestNewToolSlicesAreArrays(t *testing.T) {
	type item struct {
		Tags []string `json:"tags"`
	}
	type page struct {
		Items []item          `json:"items"`
		Index map[string]item `json:"index"`
		Next  *[]int          `json:"next"`
	}
	list, err := NewTool("List.", func(_ context.Context, in struct {
		IDs []string `json:"ids"`
	}) (page, error) {
		return page{Items: []item{{}}, Index: map[string]item{"a": {}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rt := mustNew(t, Options{Tools: Tools{"t": Tools{"list": list}}})
	sig := rt.Catalog()[0].Signature
	if strings.Contains(sig, "null") {
		t.Errorf("got a signature with null:\n%s", sig)
	}
	for _, want := range []string{"ids: Array<string>", "items: Array<{", "tags: Array<string>"} {
		if !strings.Contains(sig, want) {
			t.Errorf("got a signature without %q:\n%s", want, sig)
		}
	}
	res, err := rt.Execute(context.Background(), `return await tools.t.list({ ids: [] })`)
	if err != nil || !res.OK {
		t.Fatalf("got %+v, %v", res, err)
	}
	if got, want := string(res.Value), `{"index":{"a":{"tags":[]}},"items":[{"tags":[]}],"next":[]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
