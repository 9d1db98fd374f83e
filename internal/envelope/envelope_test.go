package envelope

import (
	"bytes"
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
	sealed, err := Seal(body, "TEST0001", []byte(`{"run":"r1","step":2}`), k1, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	odd, _ := Seal(nil, "TEST0001", []byte(`{"run":"r","extra":1}`), k1, nil)
	if _, _, err := Open(odd, "TEST0001", [][]byte{k1}, &h); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown field: %v", err)
	}
	// check stops sealing.
	stop := errors.New("stop")
	if _, err := Seal(bytes.Repeat([]byte{1}, 3<<20), "TEST0001", nil, k1, func() error { return stop }); !errors.Is(err, stop) {
		t.Errorf("check: %v", err)
	}
	if Overhead("TEST0001", 10) != len(mustSeal(t, nil, []byte("0123456789"), k1)) {
		t.Error("Overhead does not match Seal")
	}
}

func mustSeal(t *testing.T, body, head, key []byte) []byte {
	b, err := Seal(body, "TEST0001", head, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 1
	return c
}
