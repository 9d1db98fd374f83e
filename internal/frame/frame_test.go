package frame

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestRoundTripAndRefusals(t *testing.T) {
	type head struct{ A int }
	inner, _ := json.Marshal(head{7})
	b := Append([]byte("rest"), "MAGIC001", inner)
	if len(b) != len("rest")+Len("MAGIC001", inner) {
		t.Fatalf("Append added %d bytes, Len says %d", len(b)-len("rest"), Len("MAGIC001", inner))
	}
	var h head
	rest, err := Split(b, "MAGIC001", &h)
	if err != nil || h.A != 7 || string(rest) != "rest" {
		t.Fatalf("%v %+v %q", err, h, rest)
	}
	if _ = append(rest, "XXXX"...); string(b[4:8]) == "XXXX" {
		t.Fatal("appending to what Split returned wrote over the frame")
	}
	// Layers nest: the outer frame's rest is the inner frame.
	outer, _ := json.Marshal(head{8})
	b2 := Append(b, "MAGIC002", outer)
	if rest, err := Split(b2, "MAGIC002", &h); err != nil || h.A != 8 || string(rest) != string(b) {
		t.Fatalf("outer: %v %+v %q", err, h, rest)
	}
	type other struct{ B int }
	for name, c := range map[string]struct {
		b     []byte
		magic string
		head  any
	}{
		"empty":          {nil, "MAGIC001", &h},
		"other magic":    {b, "MAGIC002", &h},
		"cut magic":      {b[:len(b)-1], "MAGIC001", &h},
		"cut front":      {b[6:], "MAGIC001", &h},
		"unknown field":  {b, "MAGIC001", &other{}},
		"length too big": {append([]byte("{}"), 0xff, 0xff, 0, 0, 'M', 'A', 'G', 'I', 'C', '0', '0', '1'), "MAGIC001", &h},
		"two values":     {Append(nil, "MAGIC001", []byte(`{"A":1} {}`)), "MAGIC001", &h},
	} {
		if _, err := Split(c.b, c.magic, c.head); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
