// Package otlp exports the OpenTelemetry SDK's spans and metrics over
// OTLP/HTTP in protobuf, configured by the standard OTEL_EXPORTER_OTLP_*
// variables.
//
// It stands in for the exporters of go.opentelemetry.io/otel/exporters,
// which encode through the generated OTLP types and bring gRPC and the
// protobuf runtime into the command: 4 MB of its binary and 3 ms of its
// start, paid by every run that exports nothing. The messages are
// written field by field here; the tests decode them with the generated
// types and compare them with what the official exporters send.
package otlp

import (
	"encoding/binary"
	"math"
	"strings"
	"unicode/utf8"
)

// Wire types of the protobuf encoding.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// enc appends protobuf fields to a buffer. Scalar fields at their zero
// value are left out, as proto3 encodes them; messages are written even
// when empty, since a present empty message differs from an absent one.
type enc struct{ b []byte }

func (e *enc) varint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

func (e *enc) tag(field, wire int) { e.varint(uint64(field)<<3 | uint64(wire)) }

func (e *enc) uint(field int, v uint64) {
	if v != 0 {
		e.tag(field, wireVarint)
		e.varint(v)
	}
}

func (e *enc) sint32(field int, v int32) { e.uint(field, uint64(uint32(v<<1)^uint32(v>>31))) }

func (e *enc) bool(field int, v bool) {
	if v {
		e.uint(field, 1)
	}
}

func (e *enc) fixed64(field int, v uint64) {
	if v != 0 {
		e.tag(field, wireFixed64)
		e.b = binary.LittleEndian.AppendUint64(e.b, v)
	}
}

func (e *enc) fixed32(field int, v uint32) {
	if v != 0 {
		e.tag(field, wireFixed32)
		e.b = binary.LittleEndian.AppendUint32(e.b, v)
	}
}

func (e *enc) double(field int, v float64) { e.fixed64(field, math.Float64bits(v)) }

// optDouble writes a field declared optional: present even when zero.
func (e *enc) optDouble(field int, v float64) {
	e.tag(field, wireFixed64)
	e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v))
}

func (e *enc) str(field int, s string) {
	if s != "" {
		e.strAlways(field, s)
	}
}

// strAlways writes a string field even when empty, as a oneof member
// must be. A string that is not UTF-8 has its bad bytes replaced: a
// collector refuses the whole request over one.
func (e *enc) strAlways(field int, s string) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	e.tag(field, wireBytes)
	e.varint(uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *enc) bytes(field int, b []byte) {
	if len(b) != 0 {
		e.tag(field, wireBytes)
		e.varint(uint64(len(b)))
		e.b = append(e.b, b...)
	}
}

// msg writes a message field whose body fills writes, then puts the
// body's length in front of it.
func (e *enc) msg(field int, fill func()) {
	e.tag(field, wireBytes)
	start := len(e.b)
	fill()
	n := len(e.b) - start
	var l [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(l[:], uint64(n))
	e.b = append(e.b, l[:k]...)
	copy(e.b[start+k:], e.b[start:start+n])
	copy(e.b[start:], l[:k])
}

// packedFixed64 writes a repeated fixed64 or double field, packed.
func (e *enc) packedFixed64(field int, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	e.tag(field, wireBytes)
	e.varint(uint64(8 * len(vs)))
	for _, v := range vs {
		e.b = binary.LittleEndian.AppendUint64(e.b, v)
	}
}

// packedVarint writes a repeated uint64 field, packed.
func (e *enc) packedVarint(field int, vs []uint64) {
	if len(vs) == 0 {
		return
	}
	e.msg(field, func() {
		for _, v := range vs {
			e.varint(v)
		}
	})
}

// dec reads protobuf fields, for the little a collector answers.
type dec struct{ b []byte }

// next reads a field's number and wire type, and its value: the number
// for varint and fixed types, the bytes for length-delimited ones. ok is
// false at the end or on a malformed buffer.
func (d *dec) next() (field, wire int, num uint64, data []byte, ok bool) {
	key, n := binary.Uvarint(d.b)
	if n <= 0 {
		return 0, 0, 0, nil, false
	}
	d.b = d.b[n:]
	field, wire = int(key>>3), int(key&7)
	switch wire {
	case wireVarint:
		num, n = binary.Uvarint(d.b)
		if n <= 0 {
			return 0, 0, 0, nil, false
		}
		d.b = d.b[n:]
	case wireFixed64:
		if len(d.b) < 8 {
			return 0, 0, 0, nil, false
		}
		num, d.b = binary.LittleEndian.Uint64(d.b), d.b[8:]
	case wireFixed32:
		if len(d.b) < 4 {
			return 0, 0, 0, nil, false
		}
		num, d.b = uint64(binary.LittleEndian.Uint32(d.b)), d.b[4:]
	case wireBytes:
		l, n := binary.Uvarint(d.b)
		if n <= 0 || l > uint64(len(d.b)-n) {
			return 0, 0, 0, nil, false
		}
		data, d.b = d.b[n:n+int(l)], d.b[n+int(l):]
	default:
		return 0, 0, 0, nil, false
	}
	return field, wire, num, data, true
}
