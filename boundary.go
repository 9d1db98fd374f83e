package codemode

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/codemode-go/codemode/internal/sandbox"
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
			return nil, errors.New("it cannot be encoded as JSON")
		}
		raw = b
	}
	if err := sandbox.CheckData(raw, "the result"); err != nil {
		return nil, err
	}
	return raw, nil
}
