package envelope

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
)

type head struct {
	Run  string `json:"run"`
	Step int    `json:"step"`
}

func TestSealOpen(t *testing.T) {
	k1, k2, k3 := []byte("key one, 32 bytes long at least!"), []byte("key two, 32 bytes long at least!"), []byte("key three, 32 bytes long, too...")
	body := make([]byte, 5, 200)
	copy(body, "hello")
	sealed := Seal(body, "TEST0001", []byte(`{"run":"r1","step":2}`), k1)
	var h head
	got, key, err := Open(sealed, "TEST0001", [][]byte{k2, k1}, &h)
	if err != nil || string(got) != "hello" || key != 1 || h.Run != "r1" || h.Step != 2 || cap(got) != 5 {
		t.Fatalf("%q %d %+v %v", got, key, h, err)
	}
	for name, c := range map[string]struct {
		b     []byte
		magic string
		keys  [][]byte
	}{
		"no key":         {sealed, "TEST0001", [][]byte{k2, k3}},
		"another kind":   {sealed, "TEST0002", [][]byte{k1}},
		"short":          {sealed[:10], "TEST0001", [][]byte{k1}},
		"a byte changed": {flip(sealed, 2), "TEST0001", [][]byte{k1}},
		"the MAC cut":    {sealed[:len(sealed)-1], "TEST0001", [][]byte{k1}},
		"no keys":        {sealed, "TEST0001", nil},
	} {
		if _, _, err := Open(c.b, c.magic, c.keys, &h); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A header with a field the reader does not know, validly sealed.
	odd := Seal(nil, "TEST0001", []byte(`{"run":"r","extra":1}`), k1)
	if _, _, err := Open(odd, "TEST0001", [][]byte{k1}, &h); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown field: %v", err)
	}
	if Overhead("TEST0001", 10) != len(Seal(nil, "TEST0001", []byte("0123456789"), k1)) {
		t.Error("Overhead does not match Seal")
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 1
	return c
}

// TestSealExact: an envelope keeps at most an eighth of its length in
// spare capacity, whatever room its body's buffer had, and still opens.
func TestSealExact(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, c := range []struct{ n, room int }{{10, 64 << 10}, {15_000, 64 << 10}, {1 << 20, 100 << 10}, {1 << 20, 0}} {
		body := make([]byte, c.n, c.n+c.room)
		for i := range body {
			body[i] = byte(i)
		}
		out := Seal(body, "TESTMAG1", []byte(`{"a":1}`), key)
		if spare := cap(out) - len(out); spare > len(out)/8 {
			t.Errorf("body %d with room %d: %d bytes spare in an envelope of %d", c.n, c.room, spare, len(out))
		}
		var head struct{ A int }
		got, _, err := Open(out, "TESTMAG1", [][]byte{key}, &head)
		if err != nil || len(got) != c.n || head.A != 1 || got[c.n-1] != byte(c.n-1) {
			t.Errorf("body %d: reopened %d bytes, %+v, %v", c.n, len(got), head, err)
		}
	}
}

// TestOpenSealed: bytes a caller sealed itself open without their MAC,
// as Open opens them; the kind and the header are still checked. (The
// MAC is not: OpenSealed is only for bytes compared in full with the
// caller's own copy.)
func TestOpenSealed(t *testing.T) {
	k := []byte("key one, 32 bytes long at least!")
	sealed := Seal([]byte("hello"), "TEST0001", []byte(`{"run":"r1","step":2}`), k)
	var h head
	got, err := OpenSealed(sealed, "TEST0001", &h)
	if err != nil || string(got) != "hello" || h.Run != "r1" || h.Step != 2 || cap(got) != 5 {
		t.Fatalf("%q %+v %v", got, h, err)
	}
	odd := Seal(nil, "TEST0001", []byte(`{"run":"r","extra":1}`), k)
	for name, c := range map[string]struct {
		b     []byte
		magic string
	}{
		"another kind":     {sealed, "TEST0002"},
		"short":            {sealed[:10], "TEST0001"},
		"the MAC cut":      {sealed[:len(sealed)-1], "TEST0001"},
		"an unknown field": {odd, "TEST0001"},
		"nothing":          {nil, "TEST0001"},
	} {
		if _, err := OpenSealed(c.b, c.magic, &h); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSealSum: an envelope whose MAC covers the body's sum opens with the
// same sum function under any of the keys, and not once any byte of it is
// changed, cut or added to, nor as an envelope sealed over all its bytes
// (or the other way round).
func TestSealSum(t *testing.T) {
	k1, k2 := []byte("key one, 32 bytes long at least!"), []byte("key two, 32 bytes long at least!")
	sum := func(b []byte) [32]byte { return sha256.Sum256(b) }
	body := bytes.Repeat([]byte("a body of some length "), 50)
	headJSON := []byte(`{"run":"r1","step":2}`)
	sealed := SealSum(bytes.Clone(body), sum(body), "TESTSUM1", headJSON, k1)
	if !HasMagic(sealed, "TESTSUM1") || HasMagic(sealed, "TEST0001") || HasMagic(nil, "TESTSUM1") {
		t.Fatal("HasMagic")
	}
	var h head
	got, key, err := OpenSum(sealed, "TESTSUM1", [][]byte{k2, k1}, &h, sum)
	if err != nil || !bytes.Equal(got, body) || key != 1 || h.Run != "r1" || h.Step != 2 {
		t.Fatalf("%d %+v %v", key, h, err)
	}
	if _, _, err := OpenSum(sealed, "TESTSUM1", [][]byte{k2}, &h, sum); !errors.Is(err, ErrInvalid) {
		t.Errorf("another key: %v", err)
	}
	for i := range sealed {
		if _, _, err := OpenSum(flip(sealed, i), "TESTSUM1", [][]byte{k1}, &h, sum); !errors.Is(err, ErrInvalid) {
			t.Fatalf("byte %d of %d flipped: %v", i, len(sealed), err)
		}
	}
	for n := range len(sealed) {
		if _, _, err := OpenSum(sealed[:n], "TESTSUM1", [][]byte{k1}, &h, sum); !errors.Is(err, ErrInvalid) {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
	if _, _, err := OpenSum(append([]byte{0}, sealed...), "TESTSUM1", [][]byte{k1}, &h, sum); !errors.Is(err, ErrInvalid) {
		t.Errorf("a byte in front: %v", err)
	}
	// The same magic sealed the other way is not an envelope of this kind,
	// in either direction.
	full := Seal(bytes.Clone(body), "TESTSUM1", headJSON, k1)
	if _, _, err := OpenSum(full, "TESTSUM1", [][]byte{k1}, &h, sum); !errors.Is(err, ErrInvalid) {
		t.Errorf("sealed over all its bytes, opened by its sum: %v", err)
	}
	if _, _, err := Open(sealed, "TESTSUM1", [][]byte{k1}, &h); !errors.Is(err, ErrInvalid) {
		t.Errorf("sealed by its sum, opened over all its bytes: %v", err)
	}
	// A sum function that ignores its input would make any body pass: the
	// MAC is only as good as the sum, which is the caller's to make.
	var calls int
	if _, _, err := OpenSum(flip(sealed, 0), "TESTSUM1", [][]byte{k2, k1}, &h, func(b []byte) [32]byte { calls++; return sum(body) }); err != nil || calls != 1 {
		t.Errorf("the sum function was called %d times: %v", calls, err)
	}
}
