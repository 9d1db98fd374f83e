package frame

import (
	"errors"
	"testing"
)

func TestRoundTripAndRefusals(t *testing.T) {
	type head struct{ A int }
	b, err := Append("MAGIC001", head{7}, []byte("rest"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var h head
	rest, err := Split(b, "MAGIC001", &h)
	if err != nil || h.A != 7 || string(rest) != "rest" {
		t.Fatalf("%v %+v %q", err, h, rest)
	}
	type other struct{ B int }
	for name, c := range map[string]struct {
		b     []byte
		magic string
		head  any
	}{
		"empty":         {nil, "MAGIC001", &h},
		"other magic":   {b, "MAGIC002", &h},
		"cut length":    {b[:10], "MAGIC001", &h},
		"cut header":    {b[:len(b)-6], "MAGIC001", &h},
		"unknown field": {b, "MAGIC001", &other{}},
	} {
		if _, err := Split(c.b, c.magic, c.head); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
