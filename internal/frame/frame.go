// Package frame lays out the states of suspended runs: a magic string,
// the length of a JSON header, the header, then opaque bytes. The sandbox
// frames its part of a state this way, and the Runtime frames the sandbox's
// part inside its own.
package frame

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrMalformed: the bytes are not a frame with this magic and a header
// that decodes.
var ErrMalformed = errors.New("frame: malformed")

// Append returns magic, the length of head's JSON, the JSON and rest, in a
// slice with room for extra more bytes.
func Append(magic string, head any, rest []byte, extra int) ([]byte, error) {
	h, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(magic)+4+len(h)+len(rest)+extra)
	out = append(out, magic...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(h)))
	out = append(out, h...)
	return append(out, rest...), nil
}

// Split reads what Append wrote: it decodes the header into head,
// refusing fields head does not have, and returns the bytes after it.
func Split(b []byte, magic string, head any) ([]byte, error) {
	if len(b) < len(magic)+4 || string(b[:len(magic)]) != magic {
		return nil, ErrMalformed
	}
	rest := b[len(magic):]
	n := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	if uint64(n) > uint64(len(rest)) {
		return nil, ErrMalformed
	}
	dec := json.NewDecoder(bytes.NewReader(rest[:n]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(head); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return rest[n:], nil
}
