package openapi

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/pb33f/go-yaml"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
)

// Request bodies
//
// An operation may offer its body in several media types. The tool sends
// the first it can, in this order of preference: JSON, then
// application/x-www-form-urlencoded, then multipart/form-data, then text
// (a string sent as it is), then any other type as raw bytes; within one
// rank, document order. A body no media type of which can be sent (another
// multipart type, a form whose schema is not an object, a form property
// in a style this package does not write, a part header the input cannot
// carry) skips the operation, required or not: a tool that cannot send
// what its API takes would have the model believe a call did what it
// asked (see RATIONALE.md).

// bodyKind is how a request body is written.
type bodyKind int

const (
	noBody        bodyKind = iota
	jsonBody               // the input's JSON, as it is
	formBody               // application/x-www-form-urlencoded fields
	multipartBody          // multipart/form-data parts
	textBody               // a string, sent as it is
	binaryBody             // bytes, given in base64
)

// reqBody is how an operation sends its request body.
type reqBody struct {
	kind      bodyKind
	mediaType string // as declared; for text and binary bodies the default Content-Type
	required  bool
	// parts says how each property of a form or multipart body is sent,
	// by property name; extra is for properties the schema does not name
	// (additionalProperties), nil meaning "by the value".
	parts map[string]*part
	extra *part
	order []string // the schema's property order: parts go in this order
	// binary bodies
	encoding string // "" for raw bytes; "base64" or "base64url": the body is that text
	needType bool   // the declared type is a wildcard: the input must name the type
}

// partKind is how a value becomes a multipart part.
type partKind int

const (
	partValue      partKind = iota // strings, numbers and booleans as text; anything else as JSON
	partJSON                       // JSON text
	partFile                       // a file object
	partTextOrFile                 // a string as text, a file object as a file (an untyped property)
)

// part is how one property of a form or multipart body is sent.
type part struct {
	// multipart
	kind        partKind
	each        bool   // an array: one part per item, each of kind
	contentType string // the Content-Type the encoding declares; "" when none or a wildcard
	fileType    string // files: the default Content-Type
	encoding    string // files: "" (raw bytes), "base64" or "base64url"
	headers     [][2]string
	// form-urlencoded, as query parameters are written
	style   string
	explode bool
	asJSON  bool
}

// Media type ranks, in order of preference.
const (
	rankJSON      = iota
	rankForm      // application/x-www-form-urlencoded
	rankMultipart // multipart/form-data
	rankText
	rankRaw
	rankNone = -1 // no tool can send it
)

// bodyRank ranks a request media type.
func bodyRank(mt string) int {
	t := mediaBase(mt)
	switch {
	case isJSON(mt):
		return rankJSON
	case t == "application/x-www-form-urlencoded":
		return rankForm
	case t == "multipart/form-data":
		return rankMultipart
	case strings.HasPrefix(t, "multipart/"), isStream(mt):
		return rankNone // mixed, related, byteranges: parts without names
	case isText(mt):
		return rankText
	}
	return rankRaw
}

// requestBody plans the request body: the first media type, in order of
// preference, that the tool can send. It returns why none can.
func (b *builder) requestBody(o *operation, op *v3.Operation) string {
	rb := op.RequestBody
	if rb == nil || rb.Content == nil || rb.Content.Len() == 0 {
		return ""
	}
	type candidate struct {
		mt    string
		media *v3.MediaType
		rank  int
	}
	var cands []candidate
	var reasons []string
	for mt, media := range rb.Content.FromOldest() {
		r := bodyRank(mt)
		if r == rankNone || media == nil {
			reasons = append(reasons, fmt.Sprintf("media type %s is not supported", mt))
			continue
		}
		cands = append(cands, candidate{mt, media, r})
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return a.rank - b.rank })
	required := rb.Required != nil && *rb.Required
	for _, c := range cands {
		body := reqBody{mediaType: c.mt, required: required}
		var fields []field
		var reason string
		switch c.rank {
		case rankJSON:
			body.kind = jsonBody
			node := mediaSchema(c.media)
			fields = b.objectFields(node, b.conv.convert(node, forRequest), rb, required)
		case rankForm, rankMultipart:
			fields, reason = b.formFields(&body, c.media, rb, c.rank == rankMultipart)
		default:
			fields = b.rawField(&body, c.media, rb, rb.Content)
		}
		if reason == "" {
			o.fields, o.body = append(o.fields, fields...), body
			return ""
		}
		reasons = append(reasons, fmt.Sprintf("%s: %s", c.mt, reason))
	}
	return "request body " + strings.Join(reasons, "; ")
}

// mediaSchema is the raw schema node of a media type, or nil.
func mediaSchema(media *v3.MediaType) *yaml.Node {
	if media.GoLow() == nil {
		return nil
	}
	return schemaNode(media.GoLow().RootNode, media.GoLow().Schema)
}

// objectFields turns a JSON, form or multipart body schema into input
// fields: the properties of a plain object body stand beside the
// parameters; any other body is the one field "body".
func (b *builder) objectFields(node *yaml.Node, s *jsonschema.Schema, rb *v3.RequestBody, required bool) []field {
	if b.flattenable(node, required) && len(s.Properties) > 0 {
		req := map[string]bool{}
		for _, r := range s.Required {
			req[r] = true
		}
		var fields []field
		for _, name := range s.PropertyOrder {
			fields = append(fields, field{in: "body", name: name, key: name, required: req[name], schema: s.Properties[name]})
		}
		return fields
	}
	if d := strings.TrimSpace(rb.Description); d != "" && s.Description == "" {
		s.Description = d
	}
	return []field{{in: "body", name: "body", key: "body", whole: true, required: required, schema: s}}
}

// formFields plans a form-urlencoded or multipart body: an object whose
// properties are fields or parts, each encoded as media.encoding says.
// Multipart file properties take a file object in the input instead of
// the schema's string.
func (b *builder) formFields(body *reqBody, media *v3.MediaType, rb *v3.RequestBody, multipart bool) ([]field, string) {
	body.kind = formBody
	if multipart {
		body.kind = multipartBody
	}
	node := mediaSchema(media)
	s := b.conv.convert(node, forRequest)
	if !objectLike(s) {
		return nil, "the schema is not an object, so there are no fields to send"
	}
	encodings := map[string]*v3.Encoding{}
	if media.Encoding != nil {
		for name, e := range media.Encoding.FromOldest() {
			if e != nil {
				encodings[name] = e
			}
		}
	}
	body.parts, body.order = map[string]*part{}, s.PropertyOrder
	for _, name := range s.PropertyOrder {
		var p *part
		var reason string
		if multipart {
			p, s.Properties[name], reason = b.multipartPart(name, s.Properties[name], encodings[name])
		} else {
			p, reason = formPart(name, encodings[name])
		}
		if reason != "" {
			return nil, reason
		}
		body.parts[name] = p
	}
	// A dictionary of files is the one case where properties the schema
	// does not name need more than their value to be sent.
	if multipart && s.AdditionalProperties != nil && binaryString(s.AdditionalProperties) {
		body.extra, s.AdditionalProperties, _ = b.multipartPart("", s.AdditionalProperties, nil)
	}
	return b.objectFields(node, s, rb, body.required), ""
}

// objectLike reports whether a body schema can be an object: typed
// object, or untyped.
func objectLike(s *jsonschema.Schema) bool {
	switch {
	case s.Type != "":
		return s.Type == "object"
	case len(s.Types) > 0:
		return slices.Contains(s.Types, "object")
	}
	return true
}

// formPart plans one form-urlencoded field. Styles and defaults are those
// of query parameters; a JSON contentType without a style sends the value
// as JSON text.
func formPart(name string, e *v3.Encoding) (*part, string) {
	p := &part{style: "form", explode: true}
	if e == nil {
		return p, ""
	}
	if e.Style != "" {
		p.style = e.Style
		p.explode = p.style == "form" || p.style == "deepObject"
	} else if e.ContentType != "" && isJSON(firstType(e.ContentType)) {
		p.asJSON = true
	}
	if e.Explode != nil {
		p.explode = *e.Explode
	}
	if p.style != "form" && p.style != "deepObject" {
		return p, fmt.Sprintf("property %q uses style %q, which is not supported", name, p.style)
	}
	return p, ""
}

// multipartPart plans one multipart property and returns the schema the
// input uses for it: a file field takes a file object instead of the
// schema's string.
func (b *builder) multipartPart(name string, s *jsonschema.Schema, e *v3.Encoding) (*part, *jsonschema.Schema, string) {
	p := &part{kind: partValue}
	ct := ""
	if e != nil {
		ct = strings.TrimSpace(e.ContentType)
	}
	if s == nil {
		s = &jsonschema.Schema{}
	}
	item := s
	if isArray(s) && s.Items != nil {
		item = s.Items
	}
	accepts := ct
	if accepts == "" {
		accepts = item.ContentMediaType
	}
	switch {
	case binaryString(item) || (ct != "" && !textual(ct)):
		// A file by its schema, or by the encoding's declaring the part
		// binary (image/png, application/pdf), whatever the schema says.
		p.kind, p.each = partFile, item != s
		p.encoding, p.fileType = fileEncoding(item), partFileType(ct, item)
		file := fileSchema(name, item, p.fileType, accepts)
		if p.each {
			s.Items = file
		} else {
			s = file
		}
	case ct != "" && isJSON(firstType(ct)):
		p.kind = partJSON
	case ct != "" && !primitive(item) && !untyped(item):
		// A text type other than JSON (XML, CSV) for a structured value:
		// the tool cannot write it, so the program gives the text.
		s = &jsonschema.Schema{Type: "string", Title: s.Title, Deprecated: s.Deprecated,
			Description: joinText(s.Description, fmt.Sprintf("Sent as it is, as %s.", firstType(ct)))}
	case untyped(item):
		p.kind, p.each = partTextOrFile, item != s
		p.fileType = partFileType(ct, item)
		either := textOrFileSchema(name, item, p.fileType, accepts)
		if p.each {
			s.Items = either
		} else {
			s = either
		}
	case primitive(item):
		p.each = item != s
	default:
		// Objects, arrays of objects, compositions: one JSON part.
		p.kind = partJSON
	}
	if ct != "" {
		if t := firstType(ct); !strings.Contains(t, "*") {
			p.contentType = t
		}
	}
	if p.kind == partJSON && p.contentType == "" {
		p.contentType = "application/json"
	}
	if e != nil && e.Headers != nil {
		for hname, h := range e.Headers.FromOldest() {
			switch strings.ToLower(hname) {
			case "content-type", "content-disposition":
				continue // the tool writes these itself
			}
			v, ok := b.headerValue(h)
			ok = ok && validHeaderName(hname)
			switch {
			case ok && strings.EqualFold(hname, "Content-Transfer-Encoding"):
				if p.kind == partFile && strings.EqualFold(v, "base64") {
					p.encoding = "base64"
				}
			case ok:
				p.headers = append(p.headers, [2]string{hname, v})
			case h != nil && h.Required:
				return p, s, fmt.Sprintf("part %q needs header %q, whose value the input cannot give", name, hname)
			}
		}
	}
	return p, s, ""
}

// headerValue is the value a part header's schema fixes (const, an enum
// of one, or a default), if any and if HTTP can carry it.
func (b *builder) headerValue(h *v3.Header) (string, bool) {
	if h == nil || h.GoLow() == nil {
		return "", false
	}
	s := b.conv.convert(schemaNode(h.GoLow().RootNode, h.GoLow().Schema), forRequest)
	var v any
	switch {
	case s.Const != nil:
		v = *s.Const
	case len(s.Enum) == 1:
		v = s.Enum[0]
	case s.Default != nil:
		var err error
		if v, err = decodeValue(s.Default); err != nil {
			return "", false
		}
	default:
		return "", false
	}
	str, ok := scalar(v)
	if !ok || str == "" || strings.ContainsFunc(str, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", false
	}
	return str, true
}

// validHeaderName reports whether a name is an HTTP token.
func validHeaderName(name string) bool {
	return name != "" && !strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	})
}

// rawField plans a text or binary body: the single field "body", a string
// or a file object without a name.
func (b *builder) rawField(body *reqBody, media *v3.MediaType, rb *v3.RequestBody, content mediaMap) []field {
	s := b.conv.convert(mediaSchema(media), forRequest)
	desc := strings.TrimSpace(s.Description)
	if desc == "" {
		desc = strings.TrimSpace(rb.Description)
	}
	if isText(body.mediaType) || (s.Type == "string" && !binaryString(s)) {
		body.kind = textBody
		if s.Type != "string" {
			s = &jsonschema.Schema{Type: "string"}
		}
		s.Description = joinText(desc, fmt.Sprintf("Sent as it is, as %s.", body.mediaType))
		return []field{{in: "body", name: "body", key: "body", whole: true, required: body.required, schema: s}}
	}
	body.kind = binaryBody
	body.encoding = fileEncoding(s)
	body.needType = strings.Contains(body.mediaType, "*")
	var others []string
	for mt := range content.KeysFromOldest() {
		if bodyRank(mt) == rankRaw {
			others = append(others, mt)
		}
	}
	ct := &jsonschema.Schema{Type: "string"}
	if body.needType {
		ct.Description = fmt.Sprintf("The body's media type (required: the API takes %s).", strings.Join(others, ", "))
	} else if len(others) > 1 {
		ct.Description = fmt.Sprintf("The body's media type: one of %s (default %s).", strings.Join(others, ", "), body.mediaType)
	} else {
		ct.Description = fmt.Sprintf("The body's media type (default %s).", body.mediaType)
	}
	file := &jsonschema.Schema{
		Type:        "object",
		Description: joinText(desc, "The request body: its bytes, base64-encoded."),
		Properties: map[string]*jsonschema.Schema{
			"data":        dataSchema(),
			"contentType": ct,
		},
		PropertyOrder:        []string{"data", "contentType"},
		Required:             []string{"data"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
	if body.needType {
		file.Required = append(file.Required, "contentType")
	}
	return []field{{in: "body", name: "body", key: "body", whole: true, required: body.required, schema: file}}
}

// fileSchema is the input shape of a file: { data, filename?, contentType? }.
// name is the property, the default filename.
// accepts is the media type the document declares for the part, which
// may be a list or a wildcard.
func fileSchema(name string, s *jsonschema.Schema, contentType, accepts string) *jsonschema.Schema {
	ctDesc := fmt.Sprintf("The part's media type (default %s).", contentType)
	if strings.ContainsAny(accepts, ",*") {
		ctDesc = fmt.Sprintf("The part's media type: the API takes %s (default %s).", accepts, contentType)
	}
	filename := &jsonschema.Schema{Type: "string", Description: "The file name sent with the part (default the property's name)."}
	if name != "" {
		filename.Description = fmt.Sprintf("The file name sent with the part (default %q).", name)
	}
	return &jsonschema.Schema{
		Type:        "object",
		Title:       s.Title,
		Description: joinText(s.Description, "A file: its bytes, base64-encoded, with an optional name and media type."),
		Deprecated:  s.Deprecated,
		Properties: map[string]*jsonschema.Schema{
			"data":        dataSchema(),
			"filename":    filename,
			"contentType": {Type: "string", Description: ctDesc},
		},
		PropertyOrder:        []string{"data", "filename", "contentType"},
		Required:             []string{"data"},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
}

// textOrFileSchema is the input shape of an untyped multipart property:
// text, or a file (OpenAPI's default part type for it is
// application/octet-stream, and such properties hold uploads in practice).
func textOrFileSchema(name string, s *jsonschema.Schema, contentType, accepts string) *jsonschema.Schema {
	file := fileSchema(name, &jsonschema.Schema{}, contentType, accepts)
	file.Description = "A file: its bytes, base64-encoded, with an optional name and media type."
	return &jsonschema.Schema{
		Title:       s.Title,
		Description: joinText(s.Description, "Text, or a file."),
		Default:     s.Default,
		Deprecated:  s.Deprecated,
		AnyOf:       []*jsonschema.Schema{{Type: "string"}, file},
	}
}

func dataSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", ContentEncoding: "base64",
		Description: "The bytes, base64-encoded (standard or URL-safe alphabet; padding optional)."}
}

// partFileType is the default Content-Type of a file part: the encoding's
// (its first type, when it lists several), else the schema's
// contentMediaType, else application/octet-stream.
func partFileType(ct string, s *jsonschema.Schema) string {
	for _, t := range []string{firstType(ct), strings.TrimSpace(s.ContentMediaType)} {
		if t != "" && !strings.Contains(t, "*") {
			return t
		}
	}
	return "application/octet-stream"
}

// firstType is the first media type of an encoding's contentType, which
// may list several ("image/png, image/jpeg").
func firstType(ct string) string {
	t, _, _ := strings.Cut(ct, ",")
	return strings.TrimSpace(t)
}

// fileEncoding is how a file's bytes are written: raw, or as base64 text
// when the schema says so (contentEncoding, or OpenAPI 3.0's format
// base64).
func fileEncoding(s *jsonschema.Schema) string {
	switch strings.ToLower(s.ContentEncoding) {
	case "base64":
		return "base64"
	case "base64url":
		return "base64url"
	}
	if s.Format == "base64" {
		return "base64"
	}
	return ""
}

// binaryString reports whether a schema is a file: a string of bytes
// (format binary or base64, a contentMediaType or a contentEncoding).
func binaryString(s *jsonschema.Schema) bool {
	if s == nil || !(allows(s, "string") || s.Type == "" && len(s.Types) == 0) {
		return false
	}
	return s.Format == "binary" || s.Format == "base64" || s.ContentEncoding != "" || s.ContentMediaType != ""
}

// textual reports whether a part media type carries text rather than a
// file's bytes.
func textual(ct string) bool {
	t := firstType(ct)
	return isText(t) || isJSON(t) || mediaBase(t) == "application/x-www-form-urlencoded"
}

// untyped reports whether a schema says nothing of its value's shape.
func untyped(s *jsonschema.Schema) bool {
	return s.Type == "" && len(s.Types) == 0 && s.Properties == nil && s.Items == nil && s.PrefixItems == nil &&
		s.AllOf == nil && s.AnyOf == nil && s.OneOf == nil && s.Not == nil && s.Enum == nil && s.Const == nil &&
		s.AdditionalProperties == nil && s.PatternProperties == nil
}

// primitive reports whether a schema's values are strings, numbers,
// booleans or null.
func primitive(s *jsonschema.Schema) bool {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) == 0 {
		if s.Enum == nil {
			return false
		}
		for _, v := range s.Enum {
			if _, ok := scalar(v); !ok {
				return false
			}
		}
		return true
	}
	for _, t := range types {
		switch t {
		case "string", "number", "integer", "boolean", "null":
		default:
			return false
		}
	}
	return true
}

func isArray(s *jsonschema.Schema) bool {
	return s.Type == "array" || slices.Contains(s.Types, "array")
}

func allows(s *jsonschema.Schema, t string) bool { return s.Type == t || slices.Contains(s.Types, t) }

// joinText joins two sentences of a description, ending the first when
// the document left it open ("The raw file data").
func joinText(a, b string) string {
	if a = strings.TrimSpace(a); a == "" {
		return b
	}
	if !strings.ContainsAny(a[len(a)-1:], ".!?:") {
		a += "."
	}
	return a + " " + b
}

// flattenable reports whether a body schema is a closed plain object whose
// properties can stand beside the parameters: an object with properties
// and nothing that makes its shape conditional, composed, nullable or open.
// A body that is optional but has required properties stays whole too,
// since its fields are required only when it is sent.
func (b *builder) flattenable(node *yaml.Node, bodyRequired bool) bool {
	n := deAlias(node)
	for hops := 0; hops < maxRefHops; hops++ {
		ref, ok := refOf(n)
		if !ok {
			break
		}
		if !b.conv.oas30 && len(n.Content) > 2 {
			return false // siblings beside the reference: keep it whole
		}
		if n = b.conv.resolve(ref); n == nil {
			return false
		}
		n = deAlias(n)
	}
	if n.Kind != yaml.MappingNode {
		return false
	}
	if props := mapValue(n, "properties"); props == nil || deAlias(props).Kind != yaml.MappingNode {
		return false
	}
	if t := mapValue(n, "type"); t != nil {
		if types := stringsOf(deAlias(t)); len(types) != 1 || types[0] != "object" {
			return false
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentRequired",
		"dependentSchemas", "patternProperties", "unevaluatedProperties", "minProperties", "maxProperties", "discriminator"} {
		if mapValue(n, k) != nil {
			return false
		}
	}
	if v := mapValue(n, "nullable"); v != nil {
		if b, _ := boolValue(deAlias(v)); b {
			return false
		}
	}
	if v := mapValue(n, "additionalProperties"); v != nil {
		if b, ok := boolValue(deAlias(v)); !ok || b {
			return false // a dictionary: extra keys are meant to be sent
		}
	}
	if !bodyRequired {
		if r := deAlias(mapValue(n, "required")); r.Kind == yaml.SequenceNode && len(r.Content) > 0 {
			return false
		}
	}
	return true
}
