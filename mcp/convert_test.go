package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/codemode-go/codemode"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestTextValue(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1}`:                      `{"a":1}`,
		"  [1, 2]\n":                   `[1,2]`,
		`{"a":`:                        `"{\"a\":"`,
		`42`:                           `"42"`,
		`true`:                         `"true"`,
		`"quoted"`:                     `"\"quoted\""`,
		`hello`:                        `"hello"`,
		``:                             `""`,
		`[not json]`:                   `"[not json]"`,
		"{\"big\": 1e400}":             `{"big":1e400}`,
		`{"id": 12345678901234567890}`: `{"id":12345678901234567890}`,
	} {
		got, err := json.Marshal(textValue(in))
		if err != nil || string(got) != want {
			t.Errorf("textValue(%q) = %s (%v), want %s", in, got, err, want)
		}
	}
}

func TestResultConversion(t *testing.T) {
	c := converter{maxInline: 4}
	for _, tc := range []struct {
		name string
		res  *mcpsdk.CallToolResult
		want string
	}{
		{"nil", nil, `null`},
		{"structured wins", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "x"}}, StructuredContent: map[string]any{"a": 1}}, `{"a":1}`},
		{"structured array", &mcpsdk.CallToolResult{StructuredContent: []any{1, 2}}, `[1,2]`},
		{"no content", &mcpsdk.CallToolResult{}, `null`},
		{"image under cap", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.ImageContent{MIMEType: "image/gif", Data: []byte("GIF8")}}},
			`{"data":"R0lGOA==","mimeType":"image/gif","size":4,"type":"image"}`},
		{"image over cap", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.ImageContent{MIMEType: "image/gif", Data: []byte("GIF89a")}}},
			`{"mimeType":"image/gif","size":6,"type":"image"}`},
		{"empty resource", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.EmbeddedResource{}}}, `{"type":"resource"}`},
		{"link", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.ResourceLink{URI: "u", Name: "n", Title: "T", MIMEType: "text/plain"}}},
			`{"mimeType":"text/plain","name":"n","title":"T","type":"resource_link","uri":"u"}`},
		{"mixed", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "a"}, &mcpsdk.TextContent{Text: "[1]"}}}, `["a",[1]]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := c.result(tc.res, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(v)
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	never := converter{maxInline: -1}
	v, _ := never.result(&mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.AudioContent{MIMEType: "audio/wav", Data: []byte{1}}}}, nil)
	if got, _ := json.Marshal(v); string(got) != `{"mimeType":"audio/wav","size":1,"type":"audio"}` {
		t.Errorf("negative cap: %s", got)
	}
}

func TestErrorResults(t *testing.T) {
	c := converter{}
	for _, tc := range []struct {
		name string
		res  *mcpsdk.CallToolResult
		want string
	}{
		{"texts joined", &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "a"}, &mcpsdk.ImageContent{}, &mcpsdk.TextContent{Text: "b"}}}, "a\nb"},
		{"structured", &mcpsdk.CallToolResult{IsError: true, StructuredContent: map[string]any{"code": 7}}, `{"code":7}`},
		{"nothing", &mcpsdk.CallToolResult{IsError: true}, "the tool reported an error without a message"},
		{"cleaned", &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "\x1b]0;title\x07\x1b[1;31mred\x1b[0m\x00 \u2028tab\there\r\n"}}}, "red tab\there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := c.result(tc.res, nil)
			if v != nil || err == nil {
				t.Fatalf("got %v, %v", v, err)
			}
			// The message must be a ToolError: only those reach the program.
			res, _ := codemode.Execute(t.Context(), codemode.Options{Tools: codemode.Tools{"t": codemode.Tools{"x": codemode.Tool{
				Run: func(_ context.Context, _ json.RawMessage) (any, error) { return nil, err },
			}}}}, `try { await tools.t.x({}) } catch (e) { return e.message }`)
			var got string
			_ = json.Unmarshal(res.Value, &got)
			if got != tc.want {
				t.Errorf("message %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	if got := sanitize(strings.Repeat("é", 10), 5, nil); got != "ééééé…" {
		t.Errorf("bounded = %q", got)
	}
	if got := sanitize(strings.Repeat("é", 5), 5, nil); got != "ééééé" {
		t.Errorf("exact = %q", got)
	}
	if got := sanitize("bad \xff utf8", 100, nil); got != "bad \uFFFD utf8" {
		t.Errorf("utf8 = %q", got)
	}
	if got := sanitize("\x1b", 100, nil); got != "" {
		t.Errorf("lone ESC = %q", got)
	}
}

func TestConvertSchema(t *testing.T) {
	if s, err := convertSchema(nil, true); s != nil || err != nil {
		t.Errorf("nil: %v %v", s, err)
	}
	s, err := convertSchema(map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}, true)
	if err != nil || s.Properties["a"].Type != "string" {
		t.Errorf("good: %v %v", s, err)
	}
	for _, bad := range []any{
		"string",
		true,
		map[string]any{"type": "string"},
		map[string]any{"type": []any{"string", "null"}},
		map[string]any{"type": 12},
		map[string]any{"properties": []any{1}},
	} {
		if _, err := convertSchema(bad, true); !errors.Is(err, errSchema) {
			t.Errorf("convertSchema(%v) = %v", bad, err)
		}
	}
	// An output schema may describe anything.
	if _, err := convertSchema(map[string]any{"type": "array"}, false); err != nil {
		t.Errorf("output array: %v", err)
	}
}
