package openapi

import (
	"reflect"
	"testing"

	"github.com/codemode-go/codemode"
)

const methodsSpec = `
openapi: 3.0.3
info: {title: Methods, version: "1"}
paths:
  /things:
    get: {operationId: listThings, responses: {"200": {description: ok}}}
    post: {operationId: createThing, responses: {"201": {description: created}}}
  /things/{id}:
    parameters: [{name: id, in: path, required: true, schema: {type: string}}]
    head: {operationId: checkThing, responses: {"200": {description: ok}}}
    put: {operationId: replaceThing, responses: {"200": {description: ok}}}
    patch: {operationId: updateThing, responses: {"200": {description: ok}}}
    delete: {operationId: deleteThing, responses: {"204": {description: gone}}}
`

// TestMethodAnnotations: operations carry what their HTTP method says.
func TestMethodAnnotations(t *testing.T) {
	api := convert(t, methodsSpec, Options{BaseURL: "http://127.0.0.1:1"})
	want := map[string]*codemode.Annotations{
		"listThings":   {ReadOnly: true, Idempotent: true},
		"checkThing":   {ReadOnly: true, Idempotent: true},
		"replaceThing": {Idempotent: true},
		"deleteThing":  {Destructive: true, Idempotent: true},
		"createThing":  nil,
		"updateThing":  nil,
	}
	for name, w := range want {
		tool, ok := api.Tools[name].(codemode.Tool)
		if !ok {
			t.Fatalf("no tool %s in %v", name, api.Tools)
		}
		if !reflect.DeepEqual(tool.Annotations, w) {
			t.Errorf("%s: %+v, want %+v", name, tool.Annotations, w)
		}
	}
}
