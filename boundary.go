package codemode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxDepth is the deepest nesting of arrays and objects that crosses the
// data boundary, in either direction.
const maxDepth = 32

// toolOutput marshals a tool's result and checks it is plain data.
func toolOutput(v any) (json.RawMessage, error) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
		if len(bytes.TrimSpace(raw)) == 0 {
			raw = []byte("null")
		}
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, errors.New("it cannot be encoded as JSON")
		}
		raw = b
	}
	if err := checkData(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// checkData verifies JSON text against the data rules: well-formed,
// nesting at most maxDepth, and no __proto__, constructor or prototype
// keys (which would change meaning inside the program).
func checkData(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct{ object, wantKey bool }
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) != 0 {
				return errors.New("it is truncated JSON")
			}
			return nil
		}
		if err != nil {
			return errors.New("it is not valid JSON")
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].wantKey = true
				}
				stack = append(stack, frame{object: d == '{', wantKey: d == '{'})
				if len(stack) > maxDepth {
					return fmt.Errorf("it is nested deeper than %d levels", maxDepth)
				}
			case '}', ']':
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].wantKey = true
				}
			}
			continue
		}
		if len(stack) == 0 {
			continue
		}
		top := &stack[len(stack)-1]
		if !top.object {
			continue
		}
		if top.wantKey {
			if k, _ := tok.(string); k == "__proto__" || k == "constructor" || k == "prototype" {
				return fmt.Errorf("it uses the reserved key %q", k)
			}
			top.wantKey = false
		} else {
			top.wantKey = true
		}
	}
}
