package codemode

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestParsePragma(t *testing.T) {
	for code, want := range map[string]Pragma{
		"return 1":                               {},
		"// @exec: yield=5s output=8000\nreturn": {Yield: 5 * time.Second, OutputBytes: 8000},
		"\n\n  // @exec: yield=1500\nreturn":     {Yield: 1500 * time.Millisecond},
		"// a comment\n// @exec: yield=1s":       {}, // only the first line
		// codex's JSON form
		`// @exec: {"yield_time_ms": 1000, "max_output_tokens": 2000}` + "\nreturn 1": {Yield: time.Second, OutputBytes: 2000 * BytesPerToken},
		`// @exec: {"max_output_tokens": 10}`:                                         {OutputBytes: 10 * BytesPerToken},
		`// @exec: {}`:                                                                {},
	} {
		got, err := ParsePragma(code)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", code, got, err, want)
		}
	}
	for _, bad := range []string{"// @exec: yield", "// @exec: yield=soon", "// @exec: output=-1", "// @exec: speed=fast", "// @exec: yield=-5s",
		`// @exec: {"yield_time_ms": 1000`, `// @exec: {"yield_time_ms": -1}`, `// @exec: {"yield_time_ms": "1s"}`, `// @exec: {"timeout_ms": 5}`} {
		if _, err := ParsePragma(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestPragmaInRuns(t *testing.T) {
	rt := mustNew(t, Options{MaxOutputBytes: 1000})
	ctx := context.Background()
	// Lowering the budget works; raising it does not.
	res, _ := rt.Execute(ctx, "// @exec: output=50\nreturn 'x'.repeat(200)")
	if !res.Truncated || len(res.Value) > 200 {
		t.Fatalf("output=50: %s", clip(res))
	}
	res, _ = rt.Execute(ctx, "// @exec: output=100000\nreturn 'x'.repeat(5000)")
	if !res.Truncated {
		t.Fatalf("output above the host's budget was honoured: %d bytes", len(res.Value))
	}
	// Codex's form lowers the budget too, in tokens.
	res, _ = rt.Execute(ctx, `// @exec: {"max_output_tokens": 12}`+"\nreturn 'x'.repeat(200)")
	if !res.Truncated || !strings.Contains(string(res.Value), "the 48-byte output limit") {
		t.Fatalf("max_output_tokens=12: %s", clip(res))
	}
	// The line stays: locations are the program's own.
	res, _ = rt.Execute(ctx, "// @exec: yield=1s\nconst a = 1\nnull.x")
	if res.Error == nil || res.Error.Location == nil || res.Error.Location.Line != 3 {
		t.Fatalf("location: %s", clip(res))
	}
	res, _ = rt.Execute(ctx, "\n// @exec: yield=never\nreturn 1")
	if res.Error == nil || res.Error.Kind != ParseError || res.Error.Location.Line != 2 || !strings.Contains(res.Error.Message, "yield=never") {
		t.Fatalf("bad pragma: %s", clip(res))
	}
}
