// Package frame lays out the states of suspended runs in layers. Each
// layer appends to the bytes of the layer below its header (JSON), the
// header's length and a magic string: the snapshot of the engine's
// memory comes first, then the sandbox's header, then the Runtime's. A
// header follows the bytes it describes so that every layer adds to the
// same buffer in place, and the largest part, the snapshot, is written
// once and never copied.
package frame

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrMalformed: the bytes do not end with a frame with this magic and a
// header that decodes.
var ErrMalformed = errors.New("frame: malformed")

// Len is how many bytes Append adds for a header of JSON head.
func Len(magic string, head []byte) int { return len(head) + 4 + len(magic) }

// Append appends head (a header's JSON), its length and magic to b.
func Append(b []byte, magic string, head []byte) []byte {
	b = append(b, head...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(head)))
	return append(b, magic...)
}

// Split reads what Append added to the end of b: it decodes the header
// into head, refusing fields head does not have, and returns the bytes
// before it, with no capacity beyond them.
func Split(b []byte, magic string, head any) ([]byte, error) {
	if len(b) < len(magic)+4 || string(b[len(b)-len(magic):]) != magic {
		return nil, ErrMalformed
	}
	b = b[:len(b)-len(magic)]
	n := binary.LittleEndian.Uint32(b[len(b)-4:])
	b = b[:len(b)-4]
	if uint64(n) > uint64(len(b)) {
		return nil, ErrMalformed
	}
	dec := json.NewDecoder(bytes.NewReader(b[len(b)-int(n):]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(head); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the header", ErrMalformed)
	}
	// Capped, so that appending to the rest (sealing it again) cannot
	// write over the header.
	rest := len(b) - int(n)
	return b[:rest:rest], nil
}
