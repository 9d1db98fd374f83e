package codemode

import (
	"encoding/json"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schemas of Go types.
//
// jsonschema.For gives a Go slice the type ["null", "array"], since a nil
// slice encodes as null; every list field of a tool made with NewTool
// then reads `null | Array<…>` to a model, which has to guard each one.
// NewTool says "array" instead, and keeps it true: its tools return []
// where the Go value holds a nil slice (emptyArrays).

// goSchema is the schema of Go type T with its slices as arrays only.
func goSchema[T any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, err
	}
	arraysOnly(s, map[*jsonschema.Schema]bool{})
	return s, nil
}

// arraysOnly turns every ["null", "array"] type of s into "array".
func arraysOnly(s *jsonschema.Schema, seen map[*jsonschema.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if len(s.Types) == 2 && slices.Contains(s.Types, "null") && slices.Contains(s.Types, "array") {
		s.Types, s.Type = nil, "array"
	}
	for _, p := range s.Properties {
		arraysOnly(p, seen)
	}
	for _, d := range s.Defs {
		arraysOnly(d, seen)
	}
	arraysOnly(s.Items, seen)
	arraysOnly(s.AdditionalProperties, seen)
}

// emptyArrays is v as JSON with a null wherever s says "array" replaced
// by []: a Go value's nil slices, as goSchema promises. A value that
// does not encode is returned as it is, for the runtime to report.
func emptyArrays(v any, s *jsonschema.Schema) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return v
	}
	out, err := json.Marshal(fillArrays(tree, s, 0))
	if err != nil {
		return v
	}
	return json.RawMessage(out)
}

// fillArrays replaces the nulls s says are arrays; depth bounds a
// recursive type's schema.
func fillArrays(v any, s *jsonschema.Schema, depth int) any {
	if s == nil || depth > 64 {
		return v
	}
	switch v := v.(type) {
	case nil:
		if s.Type == "array" {
			return []any{}
		}
	case map[string]any:
		for k, e := range v {
			if p, ok := s.Properties[k]; ok {
				v[k] = fillArrays(e, p, depth+1)
			} else if s.AdditionalProperties != nil {
				v[k] = fillArrays(e, s.AdditionalProperties, depth+1)
			}
		}
	case []any:
		for i, e := range v {
			v[i] = fillArrays(e, s.Items, depth+1)
		}
	}
	return v
}
