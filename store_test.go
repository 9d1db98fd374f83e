package codemode

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/codemode-go/codemode/store"
)

func TestStateAcrossRuns(t *testing.T) {
	rt := mustNew(t, Options{Values: store.NewMemoryValues(3, 200), MaxToolCalls: 20})
	alice := WithSession(context.Background(), "alice")
	res, err := rt.Execute(alice, `await tools.$codemode.store({ key: "cursor", value: { page: 3, seen: ["a", "b"] } })
await tools.$codemode.store({ key: "n", value: 1 })
return (await tools.$codemode.keys()).keys`)
	if err != nil || string(res.Value) != `["cursor","n"]` {
		t.Fatalf("%v %s", err, clip(res))
	}
	if res.ToolCalls[0].Name != "$codemode.store" {
		t.Fatalf("audit %+v", res.ToolCalls)
	}
	res, _ = rt.Execute(alice, `const c = (await tools.$codemode.load({ key: "cursor" })).value
await tools.$codemode.store({ key: "n", value: null })
return [c.page, c.seen.length, (await tools.$codemode.load({ key: "n" })).value, (await tools.$codemode.keys()).keys]`)
	if string(res.Value) != `[3,2,null,["cursor"]]` {
		t.Fatalf("second run: %s", clip(res))
	}
	// Another session sees nothing of alice's.
	res, _ = rt.Execute(WithSession(context.Background(), "bob"), `return [(await tools.$codemode.load({ key: "cursor" })).value, (await tools.$codemode.keys()).keys]`)
	if string(res.Value) != `[null,[]]` {
		t.Fatalf("bob: %s", clip(res))
	}
	// Limits and the data boundary hold, as catchable errors.
	res, _ = rt.Execute(alice, `const out = []
for (const [key, value] of [["big", "x".repeat(300)], ["", 1], ["k".repeat(300), 1], ["f", () => 1], ["b", 1], ["c", 1], ["d", 1]]) {
  try { await tools.$codemode.store({ key, value }); out.push("ok") } catch (e) { out.push(e.kind + ": " + e.message.slice(0, 120)) }
}
try { await tools.$codemode.load({}) } catch (e) { out.push(e.message) }
return out`)
	v := string(res.Value)
	for _, want := range []string{"the value would take it past 200 bytes", "a key is a string of 1 to 256 bytes", "InvalidDataValue", `"ok","ok"`, "it has 3 keys", "pass { key }"} {
		if !strings.Contains(v, want) {
			t.Errorf("%q not in %s", want, v)
		}
	}
	if !strings.Contains(rt.Instructions(), "tools.$codemode.store") {
		t.Error("the instructions do not mention the state tools")
	}
	plain := mustNew(t, Options{})
	res, _ = plain.Execute(context.Background(), `try { await tools.$codemode.store({ key: "a", value: 1 }) } catch (e) { return e.kind }`)
	if string(res.Value) != `"UnknownTool"` || strings.Contains(plain.Instructions(), "$codemode.store") {
		t.Fatalf("without a Store: %s", clip(res))
	}
}

// TestStoreKeysWithSurrogates: keys that decoding would merge (lone
// surrogates all become U+FFFD) are refused; a real pair is a key like any
// other; a session's values go when it is forgotten.
func TestStoreKeysWithSurrogates(t *testing.T) {
	st := store.NewMemoryValues(0, 0)
	rt := mustNew(t, Options{Values: st})
	alice := WithSession(context.Background(), "alice")
	res, _ := rt.Execute(alice, `const out = []
for (const key of ["\ud800", "\udbff", "a\udc00", "\ud800x", "x\ud83d", "\\\ud800", "\ud83d\ude00", "\\ud800", "é"]) {
  try { await tools.$codemode.store({ key, value: key }); out.push("ok") } catch (e) { out.push("refused") }
}
return [out, (await tools.$codemode.keys()).keys]`)
	want := `[["refused","refused","refused","refused","refused","refused","ok","ok","ok"],["\\ud800","é","😀"]]`
	if string(res.Value) != want {
		t.Fatalf("%s\nwant %s", res.Value, want)
	}
	if st.Sessions() != 1 {
		t.Fatalf("%d sessions", st.Sessions())
	}
	if err := st.Drop(context.Background(), "alice"); err != nil || st.Sessions() != 0 {
		t.Fatalf("forget: %v, %d sessions", err, st.Sessions())
	}
	for _, c := range []struct {
		text string
		want bool
	}{{`"\ud800"`, true}, {`"\ud83d\ude00"`, false}, {`"\\ud800"`, false}, {`"\\\ud800"`, true}, {`"\uDC00"`, true}, {`"\ud800\u0041"`, true}, {`"\u00e9"`, false}, {`"\ud8"`, false}} {
		if got := loneSurrogate(json.RawMessage(c.text)); got != c.want {
			t.Errorf("loneSurrogate(%s) = %v", c.text, got)
		}
	}
}
