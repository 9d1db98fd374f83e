package sandbox

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckData(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		json string
		err  string // substring; "" means valid
	}{
		{`{"a":1,"b":[1,{"c":null}],"d":"x"}`, ""},
		{deep(32), ""},
		{deep(33), "deeper than 32 levels at the input" + strings.Repeat("[0]", 31)},
		{`{"a":{"b":[0,{"__proto__":1}]}}`, `reserved key "__proto__" at the input.a.b[1]; rename it`},
		{`[{"constructor":1}]`, `reserved key "constructor" at the input[0]`},
		{`{"x-y":{"prototype":2}}`, `reserved key "prototype" at the input["x-y"]`},
		{`{"prototype_":1,"constructors":[]}`, ""},
		{`{"a":`, "truncated"},
		{`{"a":1}}`, "not valid JSON"},
		{`nope`, "not valid JSON"},
	} {
		err := CheckData([]byte(tc.json), "the input")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%.40s: unexpected %v", tc.json, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%.40s: got %v, want %q", tc.json, err, tc.err)
		}
	}
}

func TestCheckDataAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`1`, `-0.5e+3`, `"a\u00e9\n"`, `"\q"`, `"\u12"`, `[1,]`, `{"a":1,}`, `{a:1}`, `01`, `1.`, `.5`, `-`, `tru`, `[1 2]`,
		`{"a" 1}`, `"unterminated`, "\"ctl\x01\"", ` [ true , false , null ] `, `{"\u005f_proto__":1}`, `""`, `{}`, `[]`,
	} {
		err := CheckData([]byte(s), "v")
		valid := json.Valid([]byte(s)) && !strings.Contains(s, `\u005f_proto__`)
		if (err == nil) != valid {
			t.Errorf("%q: CheckData = %v, json.Valid = %v", s, err, json.Valid([]byte(s)))
		}
	}
}

func BenchmarkCheckData(b *testing.B) {
	data, _ := json.Marshal(map[string]any{"items": make([]map[string]any, 200), "name": "x", "n": 1.5})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := CheckData(data, "v"); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCheckData: CheckData accepts exactly what encoding/json accepts,
// less the data rules.
func FuzzCheckData(f *testing.F) {
	f.Add(`{"a":[1,2,{"b":"c"}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckData([]byte(s), "v")
		if json.Valid([]byte(s)) {
			if err != nil && !strings.Contains(err.Error(), "reserved key") && !strings.Contains(err.Error(), "deeper than") {
				t.Fatalf("valid JSON %q refused: %v", s, err)
			}
		} else if err == nil {
			t.Fatalf("invalid JSON %q accepted", s)
		}
	})
}
