// Package envelope seals what codemode hands out to be given back later —
// the state of a suspended run, the ticket of an approval — in one layout
// with one MAC: the body (the largest part, written once, never copied),
// then a JSON header, its length, a magic string naming what it is, and an
// HMAC-SHA256 of all of it (Seal), or of the body's sum and the rest
// (SealSum). The header follows the body so that sealing appends to the
// body's buffer in place.
//
// Keys rotate: Seal uses the first key, and Open accepts any of the keys
// it is given, so a host adds a new key in front and drops the old one
// once the envelopes made with it have been used or have expired.
package envelope

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
)

// ErrInvalid: the bytes are not an envelope of this kind, were changed,
// or were sealed with none of the keys.
var ErrInvalid = errors.New("envelope: damaged, of another kind, or sealed with another key")

// MACSize is how many bytes the MAC adds.
const MACSize = sha256.Size

// Overhead is how many bytes Seal adds to a body for a header of n bytes.
func Overhead(magic string, n int) int { return n + 4 + len(magic) + MACSize }

// Seal appends head (a header's JSON), its length, magic and the MAC
// under key to body, and returns the envelope, with at most an eighth of
// its length in spare capacity.
func Seal(body []byte, magic string, head []byte, key []byte) []byte {
	out := appendTail(body, magic, head)
	mac := hmac.New(sha256.New, key)
	mac.Write(out)
	return trim(mac.Sum(out))
}

// appendTail appends what follows the body: the header, its length and
// the magic.
func appendTail(body []byte, magic string, head []byte) []byte {
	out := append(body, head...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(head)))
	return append(out, magic...)
}

// trim cuts off spare room past an eighth of the envelope. An envelope
// is kept, maybe for days, by whoever holds it; spare room the body's
// writer left (a small snapshot's buffer starts at 64 KiB) would be kept
// with it. The copy costs microseconds for the envelopes that have that
// much room: small ones.
func trim(out []byte) []byte {
	if cap(out)-len(out) > len(out)/8 {
		out = append(make([]byte, 0, len(out)), out...)
	}
	return out
}

// SealSum is Seal for a body whose MAC covers sum, a collision-resistant
// digest of the body the caller computed (the sandbox's snapshot sum,
// most of which a step copies from the last), instead of the body
// itself: the envelope's layout is the same, but its MAC is over sum and
// what follows the body, so sealing a large body costs microseconds. A
// magic is sealed one way only, Seal or SealSum: the MAC covers the
// magic, so an envelope is never checked the other way.
func SealSum(body []byte, sum [32]byte, magic string, head []byte, key []byte) []byte {
	out := appendTail(body, magic, head)
	return trim(sumMAC(key, sum, out[len(body):]).Sum(out))
}

// sumMAC is the MAC of an envelope sealed by SealSum, before its Sum:
// the body's sum, then tail (the header, its length and the magic).
func sumMAC(key []byte, sum [32]byte, tail []byte) hash.Hash {
	mac := hmac.New(sha256.New, key)
	mac.Write(sum[:])
	mac.Write(tail)
	return mac
}

// OpenSum is Open for an envelope SealSum sealed: sum computes the digest
// of a body (any bytes), once, whichever key sealed it.
func OpenSum(b []byte, magic string, keys [][]byte, head any, sum func([]byte) [32]byte) (body []byte, key int, err error) {
	signed, got, ok := cut(b, magic)
	if !ok {
		return nil, 0, ErrInvalid
	}
	// The header's length is read before the MAC is checked, to find
	// where the body ends: a wrong one gives another body, whose sum then
	// fails the MAC like any other change.
	n := binary.LittleEndian.Uint32(signed[len(signed)-len(magic)-4:])
	tailLen := uint64(n) + 4 + uint64(len(magic))
	if tailLen > uint64(len(signed)) {
		return nil, 0, ErrInvalid
	}
	split := len(signed) - int(tailLen)
	s := sum(signed[:split])
	key = keyFor(keys, got, func(k []byte) hash.Hash { return sumMAC(k, s, signed[split:]) })
	if key < 0 {
		return nil, 0, ErrInvalid
	}
	body, err = parse(signed, magic, head)
	return body, key, err
}

// cut splits an envelope of kind magic into what its MAC covers and the
// MAC, reporting false when b is too short to be one or ends with
// another magic.
func cut(b []byte, magic string) (signed, mac []byte, ok bool) {
	if len(b) < len(magic)+4+MACSize {
		return nil, nil, false
	}
	signed, mac = b[:len(b)-MACSize], b[len(b)-MACSize:]
	return signed, mac, string(signed[len(signed)-len(magic):]) == magic
}

// keyFor is the index of the first of keys under which mac computes
// want, or -1.
func keyFor(keys [][]byte, want []byte, mac func(key []byte) hash.Hash) int {
	for i, k := range keys {
		if hmac.Equal(mac(k).Sum(nil), want) {
			return i
		}
	}
	return -1
}

// Open checks the envelope's MAC under each of keys in turn and its
// magic, decodes its header into head (refusing fields head does not
// have), and returns the body, with no capacity beyond it, and the index
// of the key that sealed it.
func Open(b []byte, magic string, keys [][]byte, head any) (body []byte, key int, err error) {
	signed, got, ok := cut(b, magic)
	if !ok {
		return nil, 0, ErrInvalid
	}
	key = keyFor(keys, got, func(k []byte) hash.Hash {
		mac := hmac.New(sha256.New, k)
		mac.Write(signed)
		return mac
	})
	if key < 0 {
		return nil, 0, ErrInvalid
	}
	body, err = parse(signed, magic, head)
	return body, key, err
}

// HasMagic reports whether b ends as an envelope of kind magic does; it
// says nothing of whether b is one.
func HasMagic(b []byte, magic string) bool {
	end := len(b) - MACSize
	return end >= len(magic) && string(b[end-len(magic):end]) == magic
}

// OpenSealed is Open for bytes the caller knows to be, byte for byte, an
// envelope of this kind it sealed itself: it kept a copy of what Seal
// returned and compared all of it. Those bytes pass the MAC, so it is
// not computed again (it is most of what opening a large envelope costs);
// the rest is checked as Open checks it. Anything less than a full
// comparison with the caller's own copy is not knowing, and goes to Open.
func OpenSealed(b []byte, magic string, head any) ([]byte, error) {
	signed, _, ok := cut(b, magic)
	if !ok {
		return nil, ErrInvalid
	}
	return parse(signed, magic, head)
}

// parse decodes the header of signed (an envelope without its MAC, whose
// magic has been checked) into head and returns the body.
func parse(signed []byte, magic string, head any) ([]byte, error) {
	rest := signed[:len(signed)-len(magic)]
	n := binary.LittleEndian.Uint32(rest[len(rest)-4:])
	rest = rest[:len(rest)-4]
	if uint64(n) > uint64(len(rest)) {
		return nil, fmt.Errorf("%w: a header longer than the envelope", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(rest[len(rest)-int(n):]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(head); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the header", ErrInvalid)
	}
	// Capped, so that appending to the body (sealing it again) cannot
	// write over the header.
	end := len(rest) - int(n)
	return rest[:end:end], nil
}
