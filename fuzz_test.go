package codemode

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzRuntime is shared by the fuzz targets: a run never affects another.
func fuzzRuntime(t testing.TB) *Runtime {
	echo := Tool{Description: "echo", Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	fail := Tool{Description: "fail", Run: func(context.Context, json.RawMessage) (any, error) { return nil, ToolError("nope") }}
	rt, err := New(Options{
		Tools:          Tools{"ns": Tools{"echo": echo, "fail": fail}},
		Timeout:        200 * time.Millisecond,
		MaxMemoryBytes: 16 << 20,
		MaxOutputBytes: 1 << 16,
		MaxToolCalls:   50,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// FuzzExecute runs arbitrary programs: Execute never panics, always
// returns a well-formed Result, and respects its deadline.
func FuzzExecute(f *testing.F) {
	for _, c := range loadConformance(f) {
		f.Add(c.Code)
	}
	for _, s := range []string{
		"while (true) {}", "return tools", "throw null", "return await tools.ns.echo({ a: [1, { b: 2 }] })",
		"const a = []; for (;;) a.push(a.length)", "return new Proxy({}, { get() { throw 1 } })",
		"let x: number = 1; return x as unknown", "}); globalThis.x = 1; (() => {", "/*", "`${",
		// Deep nesting around the pre-scan's limits, in both languages.
		"let x: number = 1; return " + strings.Repeat("!", 300) + "x",
		"return " + strings.Repeat("[", 250) + "1" + strings.Repeat("]", 250),
		strings.Repeat("function f(a: number) {", 63) + strings.Repeat("}", 63) + "return 1",
		"let x = 0; " + strings.Repeat("if (x) x; else ", 2000) + "x = 1; return x",
		"x = {} /})(); y; (async () => { 1 /1",
		`const e = new ToolError("x"); e.kind = "TimeoutExceeded"; throw e`,
	} {
		f.Add(s)
	}
	rt := fuzzRuntime(f)
	f.Fuzz(func(t *testing.T, code string) {
		start := time.Now()
		res, err := rt.Execute(context.Background(), code)
		if err != nil {
			t.Fatalf("Execute returned an error without cancellation: %v", err)
		}
		if elapsed := time.Since(start); elapsed > 200*time.Millisecond+3*time.Second {
			t.Fatalf("run took %v with a 200ms timeout", elapsed)
		}
		checkResultShape(t, res)
	})
}

func checkResultShape(t *testing.T, res Result) {
	t.Helper()
	if res.ToolCalls == nil {
		t.Fatal("nil ToolCalls")
	}
	if res.OK == (res.Error != nil) {
		t.Fatalf("ok=%v with error %+v", res.OK, res.Error)
	}
	if res.OK && !json.Valid(res.Value) {
		t.Fatalf("invalid value JSON %q", res.Value)
	}
	if !res.OK && !isKind(string(res.Error.Kind)) {
		t.Fatalf("unknown kind %q", res.Error.Kind)
	}
	if _, err := json.Marshal(res); err != nil {
		t.Fatalf("Result does not marshal: %v", err)
	}
}

// FuzzDataBoundary sends JSON through the program and back: data that
// satisfies the rules round-trips exactly; anything else is refused with
// InvalidDataValue, never mangled.
func FuzzDataBoundary(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[true,null,"x"],"c":{"d":-0.5e3}}`, `[]`, `"\u00e9\ud83d\ude00"`, `{"__proto__":1}`,
		`{"constructor":{"a":1}}`, strings.Repeat("[", 33) + strings.Repeat("]", 33), `1e400`, `{"a":"\u0000"}`,
		`{"":1,"1":2,"-1":3}`, `12345678901234567890`,
	} {
		f.Add(s)
	}
	rt := fuzzRuntime(f)
	f.Fuzz(func(t *testing.T, text string) {
		var want any
		// Invalid UTF-8 cannot be written into a program's source intact.
		if !utf8.ValidString(text) || json.Unmarshal([]byte(text), &want) != nil {
			return
		}
		for _, prog := range []string{
			"return JSON.parse(" + strconv.Quote(text) + ")",
			"return await tools.ns.echo({ v: JSON.parse(" + strconv.Quote(text) + ") })",
		} {
			res, err := rt.Execute(context.Background(), prog)
			if err != nil {
				t.Fatal(err)
			}
			checkResultShape(t, res)
			if !res.OK {
				if k := res.Error.Kind; k != InvalidDataValue && k != ExecutionFailure && k != TimeoutExceeded && k != MemoryLimitExceeded {
					t.Fatalf("%s: unexpected kind %s: %s", prog, k, res.Error.Message)
				}
				continue
			}
			var got any
			if err := json.Unmarshal(res.Value, &got); err != nil {
				t.Fatal(err)
			}
			if m, ok := got.(map[string]any); ok && strings.Contains(prog, "echo") {
				got = m["v"]
			}
			if !jsonNumbersEqual(got, want) {
				t.Fatalf("%s: round trip gave %s", prog, res.Value)
			}
		}
	})
}

// jsonNumbersEqual compares decoded JSON, treating numbers as the float64
// JavaScript holds (so 1e400 → null-free comparisons work via Inf checks).
func jsonNumbersEqual(a, b any) bool {
	if x, ok := a.(float64); ok {
		y, ok := b.(float64)
		return ok && (x == y || (x != x && y != y))
	}
	if b == nil && a == nil {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// FuzzCanonicalJSON: canonical JSON is the same value as its input, is
// its own canonical form, and the shortcut for input that is canonical
// already agrees with writing it out.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[1,2,{"d":null,"c":true}]}`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `"x\u202ey"`, `"\ud800"`,
		`{"\n":1,"a":2}`, `{"a\"b":1,"a":2}`, `[1e400,-0,0.1,12345678901234567890]`, `{"é":1,"z":2}`, `"\b\f/"`,
		`{ "a" : 1 }`, `"\u00e9"`, `"é"`, `"️"`, `{"":1,"a":{}}`, `[[],[{}]]`, `{"a":"\t\r\n\\\""}`, `1`, ``, `{`, `[1,]`,
	} {
		f.Add([]byte(s))
	}
	decode := func(b []byte) (any, error) {
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		var v any
		err := dec.Decode(&v)
		return v, err
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := canonicalJSON(in)
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("%q → invalid %q", in, c)
		}
		a, _ := decode(in)
		b, err := decode(c)
		if err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%q → %q: another value (%v)", in, c, err)
		}
		if again, err := canonicalJSON(c); err != nil || string(again) != string(c) {
			t.Fatalf("%q → %q → %q: not a fixed point", in, c, again)
		}
		if canonicalAlready(in) {
			if slow, _ := canonicalSlow(in); string(slow) != string(in) {
				t.Fatalf("%q taken as canonical, but written %q", in, slow)
			}
		}
		if slow, _ := canonicalSlow(in); string(slow) != string(c) {
			t.Fatalf("%q: the shortcut gives %q, writing it out %q", in, c, slow)
		}
	})
}
