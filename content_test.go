package codemode

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func TestTakeContent(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG pixels"))
	for _, tc := range []struct {
		name, in, want string
		items          int
	}{
		{"alone", `{"type":"image","mimeType":"image/png","data":"` + png + `"}`,
			`{"content":1,"mimeType":"image/png","size":11,"type":"image"}`, 1},
		{"in data, order kept", `{"z":1,"shots":[ {"data":"` + png + `","type":"image","mimeType":"image/png","size":12} ,"x"],"a":[]}`,
			`{"z":1,"shots":[ {"content":1,"mimeType":"image/png","size":11,"type":"image"} ,"x"],"a":[]}`, 1},
		{"text resource", `[{"type":"resource","uri":"file:///a.txt","text":"hi"}]`,
			`[{"content":1,"size":2,"type":"resource","uri":"file:///a.txt"}]`, 1},
		{"an extra key is data", `{"type":"image","mimeType":"image/png","data":"` + png + `","alt":"x"}`, "", 0},
		{"not base64", `{"type":"image","mimeType":"image/png","data":"not base64!"}`, "", 0},
		{"no mime type", `{"type":"audio","data":"` + png + `"}`, "", 0},
		{"data not a string", `{"type":"image","mimeType":"image/png","data":{"type":"image"}}`, "", 0},
		{"blob and text", `{"type":"resource","uri":"u","blob":"` + png + `","text":"t"}`, "", 0},
		{"escaped keys", `{"t\u0079pe":"image","mimeType":"image/png","data":"` + png + `"}`,
			`{"content":1,"mimeType":"image/png","size":11,"type":"image"}`, 1},
		{"a string that looks like one", `"{\"type\":\"image\"}"`, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, items, omitted := takeContent([]byte(tc.in), 1<<20)
			want := tc.want
			if want == "" {
				want = tc.in
			}
			if string(out) != want || len(items) != tc.items || omitted != 0 {
				t.Errorf("got %s, %d items, %d omitted; want %s, %d items", out, len(items), omitted, want, tc.items)
			}
			if !json.Valid(out) {
				t.Errorf("not JSON: %s", out)
			}
		})
	}
	// Empty data is not an image; items past MaxContentItems stay out.
	if out, items, _ := takeContent([]byte(`{"type":"image","mimeType":"image/png","data":""}`), 1<<20); len(items) != 0 || !strings.Contains(string(out), `"data":""`) {
		t.Errorf("an empty image: %s, %d items", out, len(items))
	}
	one := `{"type":"image","mimeType":"image/png","data":"` + png + `"}`
	many := "[" + strings.Repeat(one+",", MaxContentItems) + one + "]"
	if _, items, omitted := takeContent([]byte(many), 1<<20); len(items) != MaxContentItems || omitted != 1 {
		t.Errorf("%d items: %d taken, %d omitted", MaxContentItems+1, len(items), omitted)
	}
	// The budget: items are taken in order while they fit.
	big := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 600))
	in := `[{"type":"image","mimeType":"image/png","data":"` + big + `"},{"type":"image","mimeType":"image/png","data":"` + big + `"},{"type":"image","mimeType":"image/png","data":"` + png + `"}]`
	out, items, omitted := takeContent([]byte(in), 1000)
	if len(items) != 2 || omitted != 1 || len(items[0].Data) != 600 || len(items[1].Data) != 11 {
		t.Fatalf("got %d items, %d omitted", len(items), omitted)
	}
	if !strings.Contains(string(out), `"omitted":"over the 1000-byte limit on the content a result carries"`) || strings.Contains(string(out), big) {
		t.Errorf("got %s", out)
	}
}

// TestRichContent: an image a tool returned, returned by the program,
// arrives in Result.Content whole even under an output budget smaller
// than it, and the value keeps a stand-in; without the option it is data.
func TestRichContent(t *testing.T) {
	pixels := bytes.Repeat([]byte("rgb"), 20000) // 60 KB
	shot, err := NewTool("Take a screenshot.", func(context.Context, struct{}) (map[string]any, error) {
		return map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(pixels)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const program = `const img = await tools.screen.shot({}); console.log("took it"); return ["the screen:", img]`
	rt := mustNew(t, Options{Tools: Tools{"screen": Tools{"shot": shot}}, RichContent: true, MaxOutputBytes: 500})
	res := run(t, rt, program)
	if !res.OK || res.Truncated || len(res.Content) != 1 {
		t.Fatalf("got %s", resultJSON(Result{OK: res.OK, Value: res.Value, Error: res.Error, Truncated: res.Truncated}))
	}
	if c := res.Content[0]; c.Type != "image" || c.MIMEType != "image/png" || !bytes.Equal(c.Data, pixels) {
		t.Errorf("content = %s %s, %d bytes", c.Type, c.MIMEType, len(c.Data))
	}
	if got, want := string(res.Value), `["the screen:",{"content":1,"mimeType":"image/png","size":60000,"type":"image"}]`; got != want {
		t.Errorf("value = %s, want %s", got, want)
	}
	if len(res.Logs) != 1 || res.Logs[0] != "took it" {
		t.Errorf("logs = %q", res.Logs)
	}

	// Past MaxContentBytes: the stand-in says so and nothing is carried.
	small := mustNew(t, Options{Tools: Tools{"screen": Tools{"shot": shot}}, RichContent: true, MaxContentBytes: 1000})
	res = run(t, small, program)
	if !res.OK || !res.Truncated || len(res.Content) != 0 || !strings.Contains(string(res.Value), `"omitted":"over the 1000-byte limit`) {
		t.Errorf("over the content limit: ok %v truncated %v, %d items, value %.200s", res.OK, res.Truncated, len(res.Content), res.Value)
	}

	// Off: the object is data, cut by the output budget like any other.
	off := mustNew(t, Options{Tools: Tools{"screen": Tools{"shot": shot}}, MaxOutputBytes: 500})
	res = run(t, off, program)
	if !res.OK || !res.Truncated || len(res.Content) != 0 || !strings.Contains(string(res.Value), "over the 500-byte output limit") {
		t.Errorf("off: ok %v truncated %v, %d items, value %.200s", res.OK, res.Truncated, len(res.Content), res.Value)
	}

	// A program's own object of that shape is content too: it could have
	// returned the same bytes as text, so nothing is gained by refusing.
	res = run(t, rt, `return { type: "audio", mimeType: "audio/wav", data: btoa("RIFF") }`)
	if !res.OK || len(res.Content) != 1 || string(res.Content[0].Data) != "RIFF" {
		t.Errorf("a program's own item: %+v", res)
	}
}
