package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/redact"
	"github.com/google/jsonschema-go/jsonschema"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxInlineBytes is the largest binary payload (an image, audio
// clip or resource blob) a tool result carries as base64 by default.
// Bigger ones are described by type, MIME type and size only: a program
// rarely needs the bytes, and megabytes of base64 would crowd its memory
// and, if returned, the model's context.
const DefaultMaxInlineBytes = 64 << 10

// maxErrorRunes bounds the upstream error text a program sees.
const maxErrorRunes = 2000

// converter turns MCP results into program values.
type converter struct {
	maxInline int // negative: never inline
}

// result converts a tool call's result into the value the program sees
// (see the package documentation for the shapes), or a ToolError for an
// isError result, with the secrets red holds redacted either way.
func (c converter) result(res *mcpsdk.CallToolResult, red *redact.Redactor) (any, error) {
	if res == nil {
		return nil, nil
	}
	if res.IsError {
		return nil, toolError(errorText(res), red)
	}
	return red.Value(c.value(res)), nil
}

// value is the program value of a successful result.
func (c converter) value(res *mcpsdk.CallToolResult) any {
	if res.StructuredContent != nil {
		return res.StructuredContent
	}
	switch len(res.Content) {
	case 0:
		return nil
	case 1:
		return c.item(res.Content[0])
	}
	items := make([]any, len(res.Content))
	for i, b := range res.Content {
		items[i] = c.item(b)
	}
	return items
}

// item converts one content block.
func (c converter) item(b mcpsdk.Content) any {
	switch b := b.(type) {
	case *mcpsdk.TextContent:
		return textValue(b.Text)
	case *mcpsdk.ImageContent:
		return c.binary(map[string]any{"type": "image", "mimeType": b.MIMEType}, "data", b.Data)
	case *mcpsdk.AudioContent:
		return c.binary(map[string]any{"type": "audio", "mimeType": b.MIMEType}, "data", b.Data)
	case *mcpsdk.ResourceLink:
		m := map[string]any{"type": "resource_link", "uri": b.URI, "name": b.Name}
		putString(m, "title", b.Title)
		putString(m, "description", b.Description)
		putString(m, "mimeType", b.MIMEType)
		if b.Size != nil {
			m["size"] = *b.Size
		}
		return m
	case *mcpsdk.EmbeddedResource:
		m := map[string]any{"type": "resource"}
		r := b.Resource
		if r == nil {
			return m
		}
		m["uri"] = r.URI
		putString(m, "mimeType", r.MIMEType)
		if r.Blob != nil {
			return c.binary(m, "blob", r.Blob)
		}
		m["text"] = r.Text
		return m
	}
	// The SDK refuses unknown block types while decoding, so this is a
	// type it knows but a tool result should not hold (tool_use,
	// tool_result): pass its wire form through.
	raw, err := b.MarshalJSON()
	if err != nil {
		return nil
	}
	return json.RawMessage(raw)
}

// binary describes a binary payload: its size always, the base64 bytes
// only up to the inline cap.
func (c converter) binary(m map[string]any, key string, data []byte) map[string]any {
	m["size"] = len(data)
	if c.maxInline >= 0 && len(data) <= c.maxInline {
		m[key] = base64.StdEncoding.EncodeToString(data)
	}
	return m
}

func putString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// textValue is a text block's value: the JSON it holds when it is an
// object or an array (servers that predate structuredContent return their
// data that way), else the string. A bare number or boolean stays a
// string: "00123" or a 20-digit id must not turn into a lossy number.
func textValue(s string) any {
	t := strings.TrimSpace(s)
	if len(t) >= 2 && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return s
}

// errorText is the message of an isError result: its text blocks, else
// its structured content, else a fixed sentence.
func errorText(res *mcpsdk.CallToolResult) string {
	var parts []string
	for _, b := range res.Content {
		if t, ok := b.(*mcpsdk.TextContent); ok && strings.TrimSpace(t.Text) != "" {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 {
		return "the tool reported an error without a message"
	}
	return strings.Join(parts, "\n")
}

// toolError makes upstream text safe to show: secrets redacted, escape
// sequences and control characters (other than newline and tab) removed,
// invalid UTF-8 replaced, and the length bounded.
func toolError(msg string, red *redact.Redactor) error {
	return codemode.ToolError(sanitize(msg, maxErrorRunes, red))
}

// sanitize cleans text for the program, the model and the log. Secrets
// are redacted before the cut, which could otherwise halve one into a
// prefix nothing recognises (a program that controls where the cut falls
// would learn all but its last character), and again after the clean-up,
// which could join one split by an escape sequence.
func sanitize(s string, maxRunes int, red *redact.Redactor) string {
	s = red.String(strings.ToValidUTF8(s, "\uFFFD"))
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0x1b { // ESC: drop the whole ANSI sequence, not just the byte
			i += ansiLength(s[i:])
			continue
		}
		i += size
		if r == '\r' {
			continue
		}
		if (unicode.IsControl(r) && r != '\n' && r != '\t') || r == '\u2028' || r == '\u2029' {
			continue
		}
		b.WriteRune(r)
	}
	s = red.String(b.String())
	if utf8.RuneCountInString(s) > maxRunes {
		return strings.TrimSpace(string([]rune(s)[:maxRunes])) + "…"
	}
	return strings.TrimSpace(s)
}

// ansiLength is the length of the escape sequence at the start of s
// (which begins with ESC): a CSI sequence "ESC [ params final", an OSC
// sequence up to BEL or ESC \, or ESC and one more character.
func ansiLength(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[':
		for i := 2; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
		}
		return len(s)
	case ']':
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	}
	_, size := utf8.DecodeRuneInString(s[1:])
	return 1 + size
}

// errSchema explains why a schema was dropped.
var errSchema = errors.New("not a usable JSON Schema")

// convertSchema turns a schema as the SDK decoded it (a map) into a
// jsonschema.Schema. An input schema must describe an object, since MCP
// arguments are one.
func convertSchema(v any, input bool) (*jsonschema.Schema, error) {
	if v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSchema, err)
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("%w: not an object", errSchema)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", errSchema, err)
	}
	if input {
		switch {
		case s.Type != "" && s.Type != "object":
			return nil, fmt.Errorf("%w: an input schema must describe an object, not %q", errSchema, s.Type)
		case len(s.Types) > 0 && !contains(s.Types, "object"):
			return nil, fmt.Errorf("%w: an input schema must describe an object, not %v", errSchema, s.Types)
		}
	}
	return &s, nil
}
