package tsgen_test

import (
	"fmt"

	"github.com/codemode-go/codemode/internal/tsgen"
)

func ExampleType() {
	schema := []byte(`{
		"type": "object",
		"properties": {
			"id": {"type": "string", "description": "Order id."},
			"status": {"enum": ["open", "closed"]},
			"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10}
		},
		"required": ["id"]
	}`)
	fmt.Println(tsgen.Type(schema, false))
	fmt.Println(tsgen.Type(schema, true))
	// Output:
	// { id: string; status?: "open" | "closed"; tags?: Array<string> }
	// {
	//   /** Order id. */
	//   id: string;
	//   status?: "open" | "closed";
	//   /** @maxItems 10 */
	//   tags?: Array<string>;
	// }
}

func ExampleSignature() {
	in := []byte(`{"type": "object", "properties": {"libraryName": {"type": "string"}}, "required": ["libraryName"]}`)
	fmt.Println(tsgen.Signature([]string{"context7", "resolve-library-id"}, "Resolve a library name to its id.", []string{"@readonly"}, in, nil, true))
	// Output:
	// /**
	//  * Resolve a library name to its id.
	//  *
	//  * @readonly
	//  */
	// tools.context7["resolve-library-id"](input: {
	//   libraryName: string;
	// }): Promise<unknown>
}
