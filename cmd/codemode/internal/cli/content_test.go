package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPRichContent: the image server-everything's get-tiny-image
// returns goes through a program that returns it, through codemode mcp,
// to a go-sdk client as an image block with the bytes the tool gave;
// --rich-content=false keeps it as data in the text.
func TestMCPRichContent(t *testing.T) {
	cfg := everythingConfig(t)
	const program = `
		const parts = await tools.everything["get-tiny-image"]({})
		const img = parts.find((p) => p && p.type === "image")
		return { caption: parts[0], img }`
	t.Run("on", func(t *testing.T) {
		cs, stderr, _ := startStdio(t, context.Background(), "--config", cfg)
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": program}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || len(res.Content) != 2 {
			t.Fatalf("got isError %v, %d blocks: %+v\n%s", res.IsError, len(res.Content), res.Content, stderr)
		}
		text := res.Content[0].(*mcpsdk.TextContent).Text
		var r struct {
			Value struct {
				Caption string         `json:"caption"`
				Img     map[string]any `json:"img"`
			} `json:"value"`
		}
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			t.Fatal(err)
		}
		img, ok := res.Content[1].(*mcpsdk.ImageContent)
		if !ok {
			t.Fatalf("second block is %T", res.Content[1])
		}
		if img.MIMEType != "image/png" || len(img.Data) < 100 || string(img.Data[1:4]) != "PNG" {
			t.Errorf("image block: %s, %d bytes starting %q", img.MIMEType, len(img.Data), img.Data[:8])
		}
		stub := r.Value.Img
		if stub["content"] != 1.0 || stub["type"] != "image" || stub["size"] != float64(len(img.Data)) || stub["data"] != nil {
			t.Errorf("stand-in = %v", stub)
		}
		if r.Value.Caption != "Here's the image you requested:" {
			t.Errorf("caption = %q", r.Value.Caption)
		}
		if strings.Contains(text, base64.StdEncoding.EncodeToString(img.Data[:30])) {
			t.Error("the text repeats the image's base64")
		}
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := tools.Tools[0].Description; !strings.Contains(d, "it reaches you as content") {
			t.Errorf("the execute description does not say how to return content:\n%s", d)
		}
	})
	t.Run("off", func(t *testing.T) {
		cs, stderr, _ := startStdio(t, context.Background(), "--config", cfg, "--rich-content=false")
		res, err := cs.CallTool(context.Background(), &mcpsdk.CallToolParams{Name: "execute", Arguments: map[string]any{"code": program}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || len(res.Content) != 1 {
			t.Fatalf("got isError %v, %d blocks\n%s", res.IsError, len(res.Content), stderr)
		}
		if text := res.Content[0].(*mcpsdk.TextContent).Text; !strings.Contains(text, `"data":"iVBORw0KGgo`) {
			t.Errorf("the image's data is not in the value: %.300s", text)
		}
	})
}
