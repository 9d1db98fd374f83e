package codemode

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// Rich content.
//
// Tools such as MCP servers return images, audio and embedded resources;
// a program sees each as a plain object in the shape MCP gives it
// ({type: "image", mimeType, data} with data in base64). With
// Options.RichContent, such an object in a program's returned value is
// taken out of the value and carried in Result.Content, and the value
// keeps a small stand-in that says where it went. A host that can show
// content (the MCP server) passes the items on as content; the JSON text
// of the value stays small either way.

// DefaultMaxContentBytes is the decoded size of the content items one
// Result carries when Options.MaxContentBytes is zero.
const DefaultMaxContentBytes = 1 << 20

// MaxContentItems bounds the content items of one Result, whatever their
// size: a client shows each as a block of its own.
const MaxContentItems = 100

// ContentItem is an image, an audio clip or an embedded resource a
// program returned (see Options.RichContent).
type ContentItem struct {
	// Type is "image", "audio" or "resource".
	Type string `json:"type"`
	// MIMEType is the item's media type (required for images and audio).
	MIMEType string `json:"mimeType,omitempty"`
	// Data is an image's or a clip's bytes, or a binary resource's.
	Data []byte `json:"data,omitempty"`
	// URI names a resource.
	URI string `json:"uri,omitempty"`
	// Text is a text resource's content.
	Text string `json:"text,omitempty"`
}

// contentKeys are the keys an object may have to be taken as content:
// the shape MCP gives an item, with the size the MCP client adds. An
// object with any other key is data and stays in the value.
var contentKeys = map[string]map[string]bool{
	"image":    {"type": true, "mimeType": true, "data": true, "size": true},
	"audio":    {"type": true, "mimeType": true, "data": true, "size": true},
	"resource": {"type": true, "mimeType": true, "uri": true, "blob": true, "text": true, "size": true},
}

// takeContent moves the content items out of a value's JSON text (valid
// JSON, as the data boundary checked it): each becomes a stand-in,
// {type, mimeType, size, content: n} naming its 1-based place in items,
// or with omitted: why, once the items' decoded bytes would pass max. The
// stand-ins keep the value's shape and its keys' order.
func takeContent(value []byte, max int) (out []byte, items []ContentItem, omitted int) {
	var objs []span
	if _, ok := scanJSON(value, 0, &objs, 0); !ok || len(objs) == 0 {
		return value, nil, 0
	}
	used := 0
	last := 0
	for _, o := range objs {
		item, size, ok := contentOf(o.fields)
		if !ok {
			continue
		}
		stub := map[string]any{"type": item.Type, "size": size}
		if item.MIMEType != "" {
			stub["mimeType"] = item.MIMEType
		}
		if item.URI != "" {
			stub["uri"] = item.URI
		}
		switch {
		case used+size > max:
			stub["omitted"] = fmt.Sprintf("over the %d-byte limit on the content a result carries", max)
			omitted++
		case len(items) == MaxContentItems:
			stub["omitted"] = fmt.Sprintf("over the limit of %d content items a result carries", MaxContentItems)
			omitted++
		default:
			used += size
			items = append(items, item)
			stub["content"] = len(items)
		}
		b, _ := json.Marshal(stub)
		out = append(out, value[last:o.start]...)
		out = append(out, b...)
		last = o.end
	}
	if last == 0 {
		return value, nil, 0
	}
	out = append(out, value[last:]...)
	return out, items, omitted
}

// span is an object in JSON text that may be a content item: its bounds
// and its members' raw values.
type span struct {
	start, end int
	fields     map[string][]byte
}

// contentOf reads a content item from an object's members, with its
// decoded size.
func contentOf(f map[string][]byte) (ContentItem, int, bool) {
	var typ string
	if json.Unmarshal(f["type"], &typ) != nil {
		return ContentItem{}, 0, false
	}
	allowed := contentKeys[typ]
	if allowed == nil {
		return ContentItem{}, 0, false
	}
	for k := range f {
		if !allowed[k] {
			return ContentItem{}, 0, false
		}
	}
	str := func(k string) (string, bool) {
		raw, ok := f[k]
		if !ok {
			return "", false
		}
		var s string
		return s, json.Unmarshal(raw, &s) == nil
	}
	bin := func(k string) ([]byte, bool) {
		s, ok := str(k)
		if !ok {
			return nil, false
		}
		b, err := base64.StdEncoding.DecodeString(s)
		return b, err == nil
	}
	item := ContentItem{Type: typ}
	item.MIMEType, _ = str("mimeType")
	if _, ok := f["mimeType"]; ok && item.MIMEType == "" {
		return ContentItem{}, 0, false
	}
	switch typ {
	case "image", "audio":
		data, ok := bin("data")
		if !ok || len(data) == 0 || item.MIMEType == "" {
			return ContentItem{}, 0, false
		}
		item.Data = data
		return item, len(data), true
	default: // resource
		uri, ok := str("uri")
		if !ok || uri == "" {
			return ContentItem{}, 0, false
		}
		item.URI = uri
		_, hasBlob := f["blob"]
		_, hasText := f["text"]
		switch {
		case hasBlob && !hasText:
			if item.Data, ok = bin("blob"); !ok {
				return ContentItem{}, 0, false
			}
			return item, len(item.Data), true
		case hasText && !hasBlob:
			if item.Text, ok = str("text"); !ok {
				return ContentItem{}, 0, false
			}
			return item, len(item.Text), true
		}
		return ContentItem{}, 0, false
	}
}

// scanJSON reads the JSON value at s[i:] (valid JSON, whitespace
// allowed), appending to objs every object whose "type" member is one of
// the content types, outermost first and in text order, and returns the
// index after the value. An object taken as a candidate is not searched
// further: a content item holds no objects. depth stops a hostile nesting
// (the data boundary already limits it).
func scanJSON(s []byte, i int, objs *[]span, depth int) (int, bool) {
	i = skipSpace(s, i)
	if i >= len(s) || depth > 64 {
		return i, false
	}
	switch s[i] {
	case '{':
		start := i
		i = skipSpace(s, i+1)
		var fields map[string][]byte
		candidate := false
		before := len(*objs)
		if i < len(s) && s[i] == '}' {
			return i + 1, true
		}
		for {
			i = skipSpace(s, i)
			kEnd, ok := scanString(s, i)
			if !ok {
				return i, false
			}
			key := s[i:kEnd]
			i = skipSpace(s, kEnd)
			if i >= len(s) || s[i] != ':' {
				return i, false
			}
			vStart := skipSpace(s, i+1)
			vEnd, ok := scanJSON(s, vStart, objs, depth+1)
			if !ok {
				return vEnd, false
			}
			if len(fields) < 8 {
				if fields == nil {
					fields = map[string][]byte{}
				}
				name := string(key[1 : len(key)-1])
				if unq, err := strconv.Unquote(string(key)); err == nil {
					name = unq
				}
				fields[name] = s[vStart:vEnd]
				if name == "type" {
					v := string(s[vStart:vEnd])
					candidate = v == `"image"` || v == `"audio"` || v == `"resource"`
				}
			} else {
				fields[""] = nil // too many members to be an item
			}
			i = skipSpace(s, vEnd)
			if i < len(s) && s[i] == ',' {
				i++
				continue
			}
			if i < len(s) && s[i] == '}' {
				i++
				break
			}
			return i, false
		}
		if candidate {
			// An item has no nested objects, so nothing was recorded
			// inside it; keep the order outermost-first by position.
			*objs = append((*objs)[:before], span{start: start, end: i, fields: fields})
		}
		return i, true
	case '[':
		i = skipSpace(s, i+1)
		if i < len(s) && s[i] == ']' {
			return i + 1, true
		}
		for {
			end, ok := scanJSON(s, i, objs, depth+1)
			if !ok {
				return end, false
			}
			i = skipSpace(s, end)
			if i < len(s) && s[i] == ',' {
				i++
				continue
			}
			if i < len(s) && s[i] == ']' {
				return i + 1, true
			}
			return i, false
		}
	case '"':
		return scanString(s, i)
	default:
		for i < len(s) {
			switch s[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, true
			}
			i++
		}
		return i, true
	}
}

// scanString returns the index after the JSON string at s[i].
func scanString(s []byte, i int) (int, bool) {
	if i >= len(s) || s[i] != '"' {
		return i, false
	}
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return i, false
}

func skipSpace(s []byte, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
