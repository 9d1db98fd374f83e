package codemode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/codemode-go/codemode/internal/sandbox"
	"github.com/google/jsonschema-go/jsonschema"
)

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
			return nil, errors.New("something that cannot be encoded as JSON")
		}
		raw = b
	}
	if err := sandbox.CheckData(raw, "the result"); err != nil {
		return nil, fmt.Errorf("something that is not plain data: %w", err)
	}
	return raw, nil
}

// validateOutput checks a result against a tool's output schema (see
// Tool.ValidateOutput).
func validateOutput(schema *jsonschema.Resolved, raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("something that is not JSON: %w", err)
	}
	if err := schema.Validate(v); err != nil {
		return fmt.Errorf("a result that does not match its output schema: %w", err)
	}
	return nil
}
