package openapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"mime/multipart"
	"net/textproto"
	"slices"
	"strings"

	"github.com/codemode-go/codemode"
)

// bodyValue is one body field present in the input, as the program gave it.
type bodyValue struct {
	f   *field
	raw json.RawMessage
}

// member is one property of a form or multipart body: its name on the
// wire, the input path naming it in errors, and its value.
type member struct {
	name, key string
	v         any
}

// payload writes the request body from the body fields present in the
// input. contentType is "" when no body is to be sent.
func (o *operation) payload(vals []bodyValue) (body []byte, contentType string, err error) {
	b := &o.body
	switch b.kind {
	case jsonBody:
		return jsonPayload(vals, b)
	case formBody, multipartBody:
		members, err := b.members(vals)
		if err != nil || (members == nil && !b.required) {
			return nil, "", err
		}
		if b.kind == formBody {
			return b.formPayload(members), b.mediaType, nil
		}
		return b.multipartPayload(members)
	case textBody, binaryBody:
		if len(vals) == 0 || string(vals[0].raw) == "null" {
			return nil, "", nil
		}
		if b.kind == textBody {
			var s string
			if json.Unmarshal(vals[0].raw, &s) != nil {
				return nil, "", codemode.ToolErrorf("invalid input property %q: the body is a string, sent as it is (%s)", vals[0].f.key, b.mediaType)
			}
			ct := b.mediaType
			if strings.Contains(ct, "*") {
				ct = "text/plain; charset=utf-8"
			}
			return []byte(s), ct, nil
		}
		return b.binaryPayload(vals[0])
	}
	return nil, "", nil
}

// jsonPayload writes a JSON body: the "body" field as it is, or the
// flattened fields as one object ("{}" for a required body given none).
func jsonPayload(vals []bodyValue, b *reqBody) ([]byte, string, error) {
	if len(vals) == 1 && vals[0].f.whole {
		return vals[0].raw, b.mediaType, nil
	}
	if len(vals) == 0 {
		if !b.required {
			return nil, "", nil
		}
		return []byte("{}"), b.mediaType, nil
	}
	var buf bytes.Buffer
	for i, v := range vals {
		if i == 0 {
			buf.WriteByte('{')
		} else {
			buf.WriteByte(',')
		}
		name, _ := json.Marshal(v.f.name)
		buf.Write(name)
		buf.WriteByte(':')
		buf.Write(v.raw)
	}
	buf.WriteByte('}')
	return buf.Bytes(), b.mediaType, nil
}

// members lists the properties of a form or multipart body in the order
// they are sent: the schema's, then the others by name. nil means no body.
func (b *reqBody) members(vals []bodyValue) ([]member, error) {
	if len(vals) == 1 && vals[0].f.whole {
		v, err := decodeValue(vals[0].raw)
		if err != nil {
			return nil, codemode.ToolErrorf("input property %q is not valid JSON", vals[0].f.key)
		}
		if v == nil {
			return nil, nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, codemode.ToolErrorf("invalid input property %q: it is an object whose properties are the %s fields", vals[0].f.key, b.mediaType)
		}
		var out []member
		for _, name := range b.order {
			if v, ok := m[name]; ok {
				out = append(out, member{name, vals[0].f.key + "." + name, v})
			}
		}
		for _, name := range sortedKeys(m) {
			if !slices.Contains(b.order, name) {
				out = append(out, member{name, vals[0].f.key + "." + name, m[name]})
			}
		}
		if out == nil {
			out = []member{} // an empty object is an empty body, not none
		}
		return out, nil
	}
	var out []member
	for _, val := range vals {
		v, err := decodeValue(val.raw)
		if err != nil {
			return nil, codemode.ToolErrorf("input property %q is not valid JSON", val.f.key)
		}
		out = append(out, member{val.f.name, val.f.key, v})
	}
	return out, nil
}

// partFor is the plan of a property, with the defaults for one the schema
// does not name.
func (b *reqBody) partFor(name string) *part {
	if p := b.parts[name]; p != nil {
		return p
	}
	if b.extra != nil {
		return b.extra
	}
	return &part{kind: partValue, style: "form", explode: true}
}

// formPayload writes an application/x-www-form-urlencoded body. Each
// property is written as a query parameter of its style would be; a null
// property is left out. Reserved characters are always percent-encoded:
// allowReserved would let a "&" in a value start another field.
func (b *reqBody) formPayload(members []member) []byte {
	var pairs []string
	for _, m := range members {
		p := b.partFor(m.name)
		f := field{name: m.name, style: p.style, explode: p.explode, asJSON: p.asJSON}
		pairs = append(pairs, f.queryPairs(m.v)...)
	}
	return []byte(strings.Join(pairs, "&"))
}

// multipartPayload writes a multipart/form-data body, one part per
// property (per item for arrays of files and of primitives); a null
// property is left out.
func (b *reqBody) multipartPayload(members []member) ([]byte, string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, m := range members {
		if m.v == nil {
			continue
		}
		p := b.partFor(m.name)
		if arr, ok := m.v.([]any); ok && p.each {
			for i, item := range arr {
				if err := writePart(w, m.name, fmt.Sprintf("%s[%d]", m.key, i), item, p); err != nil {
					return nil, "", err
				}
			}
			continue
		}
		if err := writePart(w, m.name, m.key, m.v, p); err != nil {
			return nil, "", err
		}
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), w.FormDataContentType(), nil
}

// writePart writes one value as a part named name; key names it in errors.
func writePart(w *multipart.Writer, name, key string, v any, p *part) error {
	kind := p.kind
	if kind == partTextOrFile {
		kind = partValue
		if _, ok := v.(map[string]any); ok {
			kind = partFile
		}
	}
	switch kind {
	case partFile:
		f, err := parseFile(key, v, true)
		if err != nil {
			return err
		}
		data := f.data
		h := partHeader(name, p)
		switch p.encoding {
		case "base64":
			data = []byte(base64.StdEncoding.EncodeToString(f.data))
			h.Set("Content-Transfer-Encoding", "base64")
		case "base64url":
			data = []byte(base64.URLEncoding.EncodeToString(f.data))
		}
		if f.filename == "" {
			f.filename = name
		}
		h.Set("Content-Disposition", h.Get("Content-Disposition")+`; filename="`+quoteEscaper.Replace(f.filename)+`"`)
		ct := f.contentType
		if ct == "" {
			ct = p.fileType
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.Set("Content-Type", ct)
		return writeBytes(w, h, data)
	case partJSON:
		data := marshalJSON(v)
		h := partHeader(name, p)
		h.Set("Content-Type", p.contentType)
		return writeBytes(w, h, data)
	}
	h := partHeader(name, p)
	s, ok := scalar(v)
	if !ok {
		// A value the schema does not type as a primitive: JSON.
		data := marshalJSON(v)
		h.Set("Content-Type", "application/json")
		return writeBytes(w, h, data)
	}
	if p.contentType != "" && textual(p.contentType) {
		h.Set("Content-Type", p.contentType)
	}
	return writeBytes(w, h, []byte(s))
}

// marshalJSON writes a decoded input value back as JSON, without the
// HTML escaping of "<", ">" and "&" that json.Marshal adds: a part holds
// what the program gave.
func marshalJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // decoded JSON always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// quoteEscaper escapes a name or filename inside a quoted
// Content-Disposition parameter as Go's multipart writer does, and
// percent-encodes line breaks as browsers do, which could otherwise start
// another header.
var quoteEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\r", "%0D", "\n", "%0A")

// partHeader is a part's Content-Disposition and the fixed headers the
// encoding declares.
func partHeader(name string, p *part) textproto.MIMEHeader {
	h := textproto.MIMEHeader{}
	for _, kv := range p.headers {
		h.Set(kv[0], kv[1])
	}
	h.Set("Content-Disposition", `form-data; name="`+quoteEscaper.Replace(name)+`"`)
	return h
}

func writeBytes(w *multipart.Writer, h textproto.MIMEHeader, data []byte) error {
	pw, err := w.CreatePart(h)
	if err != nil {
		return err
	}
	_, err = pw.Write(data)
	return err
}

// binaryPayload writes a raw body from a file object.
func (b *reqBody) binaryPayload(val bodyValue) ([]byte, string, error) {
	v, err := decodeValue(val.raw)
	if err != nil {
		return nil, "", codemode.ToolErrorf("input property %q is not valid JSON", val.f.key)
	}
	f, err := parseFile(val.f.key, v, false)
	if err != nil {
		return nil, "", err
	}
	ct := f.contentType
	if ct == "" {
		if b.needType {
			return nil, "", codemode.ToolErrorf("invalid input property %q: contentType is required, since the API takes %s", val.f.key, b.mediaType)
		}
		ct = b.mediaType
	}
	switch b.encoding {
	case "base64":
		return []byte(base64.StdEncoding.EncodeToString(f.data)), ct, nil
	case "base64url":
		return []byte(base64.URLEncoding.EncodeToString(f.data)), ct, nil
	}
	return f.data, ct, nil
}

// fileValue is a file the program passed: its bytes, and optionally a
// name and a media type.
type fileValue struct {
	data                  []byte
	filename, contentType string
}

// The shapes a file takes in the input, for error messages.
const (
	fileShape = `{ data: "<base64>", filename?: "...", contentType?: "..." }`
	bodyShape = `{ data: "<base64>", contentType?: "..." }`
)

// parseFile reads a file object; named says whether it may carry a
// filename (a multipart part; a raw body has none).
func parseFile(key string, v any, named bool) (fileValue, error) {
	shape := fileShape
	if !named {
		shape = bodyShape
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fileValue{}, codemode.ToolErrorf("invalid input property %q: a file is an object %s, not %s", key, shape, kindOf(v))
	}
	for k := range m {
		if k != "data" && k != "contentType" && (k != "filename" || !named) {
			return fileValue{}, codemode.ToolErrorf("invalid input property %q: a file is an object %s; %q is not one of its properties", key, shape, k)
		}
	}
	data, ok := m["data"].(string)
	if !ok {
		return fileValue{}, codemode.ToolErrorf(`invalid input property %q: a file is an object %s; "data", its bytes in base64, is missing or not a string`, key, shape)
	}
	var f fileValue
	var err error
	if f.data, err = decodeBase64(data); err != nil {
		return fileValue{}, codemode.ToolErrorf(`invalid input property %q: "data" is not base64 (%v)`, key, err)
	}
	if x, present := m["filename"]; present && x != nil {
		s, ok := x.(string)
		if !ok || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return fileValue{}, codemode.ToolErrorf(`invalid input property %q: "filename" must be a string without control characters`, key)
		}
		f.filename = s
	}
	if x, present := m["contentType"]; present && x != nil {
		s, ok := x.(string)
		t, _, err := mime.ParseMediaType(s)
		if !ok || err != nil || strings.Contains(t, "*") || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return fileValue{}, codemode.ToolErrorf(`invalid input property %q: "contentType" must be a media type such as "image/png"`, key)
		}
		f.contentType = s
	}
	return f, nil
}

// kindOf names a JSON value's type for messages.
func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	case []any:
		return "an array"
	}
	return "an object"
}

// decodeBase64 accepts what programs produce: the standard or URL-safe
// alphabet, with or without padding, with line breaks.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, s)
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	return enc.DecodeString(s)
}
