package openapi

import (
	"fmt"
	"mime"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/pb33f/go-yaml"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/datamodel/low"
	lowbase "github.com/pb33f/libopenapi/datamodel/low/base"
	"github.com/pb33f/libopenapi/orderedmap"

	"github.com/codemode-go/codemode"
)

// field is one property of a tool's input and where it goes on the wire.
type field struct {
	key      string // property name in the input
	in       string // "path", "query", "header" or "body"
	name     string // parameter name, or body property name
	style    string // "form", "deepObject" or "simple" (parameters)
	explode  bool
	reserved bool // allowReserved: RFC 3986 reserved characters are sent as they are
	asJSON   bool // a parameter with JSON content: the value is sent as JSON text
	whole    bool // the entire request body (the "body" field)
	required bool
	schema   *jsonschema.Schema
}

// operation is everything a tool needs at call time.
type operation struct {
	c        *client
	id       string // operationId, or "METHOD /path"
	method   string
	path     string // the path template
	server   string // the chosen server URL, variables substituted; "" when none
	fields   []field
	body     reqBody
	accept   string
	security security
}

// builder converts a document's operations.
type builder struct {
	doc     *v3.Document
	conv    *converter
	types   *codemode.Types // the document's named schemas
	c       *client
	schemes map[string]*v3.SecurityScheme
}

func newBuilder(doc *v3.Document, conv *converter, opts Options) *builder {
	b := &builder{doc: doc, conv: conv, c: newClient(opts), schemes: map[string]*v3.SecurityScheme{}}
	b.types = conv.types()
	if doc.Components != nil && doc.Components.SecuritySchemes != nil {
		for name, s := range doc.Components.SecuritySchemes.FromOldest() {
			b.schemes[name] = s
		}
	}
	return b
}

func (b *builder) build(api *API) {
	if b.doc.Paths == nil || b.doc.Paths.PathItems == nil {
		return
	}
	var names [][]string
	var tools []codemode.Tool
	for path, item := range b.doc.Paths.PathItems.FromOldest() {
		if item == nil {
			continue
		}
		for method, op := range item.GetOperations().FromOldest() {
			if op == nil {
				continue
			}
			method = strings.ToUpper(method)
			id := strings.TrimSpace(op.OperationId)
			if id == "" {
				id = method + " " + path
			}
			o, reason := b.operation(id, method, path, item, op)
			if reason != "" {
				api.Skipped = append(api.Skipped, Skipped{Operation: id, Reason: reason})
				continue
			}
			names = append(names, toolPath(op.OperationId, method, path))
			tools = append(tools, o.tool(description(method, path, op), b.output(op), b.types))
		}
	}
	for i, p := range uniquePaths(names) {
		insertTool(api.Tools, p, tools[i])
	}
}

// description is the tool description: summary and description, or the
// method and path when the document gives neither.
func description(method, path string, op *v3.Operation) string {
	parts := []string{}
	for _, s := range []string{op.Summary, op.Description} {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(parts, s) {
			parts = append(parts, s)
		}
	}
	d := strings.Join(parts, "\n\n")
	if d == "" {
		d = method + " " + path
	}
	if op.Deprecated != nil && *op.Deprecated {
		d = "Deprecated. " + d
	}
	return d
}

var templateVar = regexp.MustCompile(`\{([^{}]*)\}`)

// operation plans one operation, or says why it cannot be converted.
func (b *builder) operation(id, method, path string, item *v3.PathItem, op *v3.Operation) (*operation, string) {
	// Some documents (Box's) tell apart operations on one URL by a
	// fragment: /files/{id}#add_shared_link. A fragment is never sent to
	// the server, so the request goes to the path before it.
	path, _, _ = strings.Cut(path, "#")
	if strings.Contains(path, "?") {
		return nil, "the path holds a query, which OpenAPI does not allow"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	o := &operation{c: b.c, id: id, method: method, path: path}
	var reason string
	if o.security, reason = b.security(op); reason != "" {
		return nil, reason
	}
	o.server = b.server(item, op)
	if reason = lost(item, op); reason != "" {
		return nil, reason
	}
	if reason = b.parameters(o, item, op); reason != "" {
		return nil, reason
	}
	for _, m := range templateVar.FindAllStringSubmatch(path, -1) {
		if !slices.ContainsFunc(o.fields, func(f field) bool { return f.in == "path" && f.name == m[1] }) {
			return nil, fmt.Sprintf("path parameter {%s} is not declared", m[1])
		}
	}
	if reason = b.requestBody(o, op); reason != "" {
		return nil, reason
	}
	if o.accept, reason = b.responses(op); reason != "" {
		return nil, reason
	}
	assignKeys(o.fields)
	return o, ""
}

// lost notices parameters and request bodies that libopenapi dropped
// because it could not build them (a reference to nothing, mostly): a
// tool without them would send broken requests.
func lost(item *v3.PathItem, op *v3.Operation) string {
	count := func(root *yaml.Node) int {
		if root == nil {
			return -1
		}
		if v := mapValue(deAlias(root), "parameters"); v != nil {
			return len(deAlias(v).Content)
		}
		return 0
	}
	if low := item.GoLow(); low != nil {
		if n := count(low.RootNode); n >= 0 && n != len(item.Parameters) {
			return "a path-level parameter could not be read (unresolvable reference?)"
		}
	}
	if low := op.GoLow(); low != nil {
		if n := count(low.RootNode); n >= 0 && n != len(op.Parameters) {
			return "a parameter could not be read (unresolvable reference?)"
		}
		if low.RootNode != nil && mapValue(deAlias(low.RootNode), "requestBody") != nil && op.RequestBody == nil {
			return "the request body could not be read (unresolvable reference?)"
		}
	}
	return ""
}

// parameters reads the path-level and operation-level parameters (the
// operation's override the path's of the same name and location).
func (b *builder) parameters(o *operation, item *v3.PathItem, op *v3.Operation) string {
	var params []*v3.Parameter
	for _, p := range item.Parameters {
		if p != nil && !slices.ContainsFunc(op.Parameters, func(q *v3.Parameter) bool {
			return q != nil && q.Name == p.Name && q.In == p.In
		}) {
			params = append(params, p)
		}
	}
	for _, p := range op.Parameters {
		if p != nil {
			params = append(params, p)
		}
	}
	// Path parameters first, then query and header, so the input reads in
	// the order of a URL.
	order := map[string]int{"path": 0, "query": 1, "header": 2}
	slices.SortStableFunc(params, func(a, b *v3.Parameter) int { return order[a.In] - order[b.In] })
	for _, p := range params {
		required := p.Required != nil && *p.Required
		if p.Name == "" {
			return "a parameter has no name (unresolvable reference?)"
		}
		f := field{in: p.In, name: p.Name, key: p.Name, required: required, explode: false}
		switch p.In {
		case "path":
			f.style, f.required = "simple", true // path parameters are always required
		case "query":
			f.style, f.explode = "form", true
		case "header":
			f.style = "simple"
			// The specification has these three ignored: they are set by
			// the content negotiation and the security schemes.
			switch strings.ToLower(p.Name) {
			case "accept", "content-type", "authorization":
				continue
			}
		case "cookie":
			if required {
				return fmt.Sprintf("required cookie parameter %q is not supported", p.Name)
			}
			continue // optional cookies are left out of the input
		default:
			if required {
				return fmt.Sprintf("required %s parameter %q is not supported", p.In, p.Name)
			}
			continue
		}
		if p.Style != "" {
			f.style = p.Style
		}
		if p.Explode != nil {
			f.explode = *p.Explode
		} else if f.style != "form" {
			f.explode = f.style == "deepObject"
		}
		f.reserved = p.AllowReserved
		switch {
		case f.in == "query" && (f.style == "form" || f.style == "deepObject"):
		case (f.in == "path" || f.in == "header") && f.style == "simple":
		default:
			return fmt.Sprintf("%s parameter %q uses style %q, which is not supported", p.In, p.Name, f.style)
		}
		var node *yaml.Node
		if p.Content != nil && p.Content.Len() > 0 {
			_, media := firstMedia(p.Content, isJSON)
			if media == nil || media.GoLow() == nil {
				return fmt.Sprintf("%s parameter %q has content type %s, which is not supported", p.In, p.Name, mediaList(p.Content))
			}
			f.asJSON = true
			node = schemaNode(media.GoLow().RootNode, media.GoLow().Schema)
		} else if p.GoLow() != nil {
			node = schemaNode(p.GoLow().RootNode, p.GoLow().Schema)
		}
		f.schema = b.conv.convert(node, forRequest)
		if d := strings.TrimSpace(p.Description); d != "" {
			f.schema.Description = d
		}
		if p.Deprecated {
			f.schema.Deprecated = true
		}
		o.fields = append(o.fields, f)
	}
	return ""
}

// assignKeys gives every field its input property name. A name used in
// more than one location is prefixed with the location in every use
// (path_id, body_id); what still collides gets a _2, _3 suffix.
func assignKeys(fields []field) {
	locs := map[string]map[string]bool{}
	for _, f := range fields {
		if locs[f.name] == nil {
			locs[f.name] = map[string]bool{}
		}
		locs[f.name][f.in] = true
	}
	used := map[string]bool{}
	for i := range fields {
		f := &fields[i]
		key := f.name
		if len(locs[f.name]) > 1 {
			key = f.in + "_" + f.name
		}
		base := key
		for n := 2; used[key]; n++ {
			key = base + "_" + strconv.Itoa(n)
		}
		used[key] = true
		f.key = key
	}
}

// inputSchema is the tool's input: one object of all fields. Unknown
// properties are refused, so a misspelt field is reported rather than
// silently not sent.
func (o *operation) inputSchema() *jsonschema.Schema {
	s := &jsonschema.Schema{
		Type:                 "object",
		Properties:           map[string]*jsonschema.Schema{},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
	for _, f := range o.fields {
		s.Properties[f.key] = f.schema
		s.PropertyOrder = append(s.PropertyOrder, f.key)
		if f.required {
			s.Required = append(s.Required, f.key)
		}
	}
	return s
}

// output is the schema of the first successful JSON response: 200, 201,
// the other 2xx codes in document order, 2XX, and default when no 2xx
// response is declared.
func (b *builder) output(op *v3.Operation) *jsonschema.Schema {
	for _, r := range successResponses(op) {
		if r.Content == nil {
			continue
		}
		if _, media := firstMedia(r.Content, isJSON); media != nil && media.GoLow() != nil {
			if node := schemaNode(media.GoLow().RootNode, media.GoLow().Schema); node != nil {
				return b.conv.convert(node, forResponse)
			}
		}
	}
	return nil
}

// successResponses lists the responses of a call that succeeds, in the
// order output prefers them.
func successResponses(op *v3.Operation) []*v3.Response {
	if op.Responses == nil {
		return nil
	}
	var ok200, ok201, wild *v3.Response
	var rest []*v3.Response
	if op.Responses.Codes != nil {
		for code, r := range op.Responses.Codes.FromOldest() {
			switch {
			case r == nil:
			case code == "200":
				ok200 = r
			case code == "201":
				ok201 = r
			case strings.EqualFold(code, "2XX"):
				wild = r
			case len(code) == 3 && code[0] == '2':
				rest = append(rest, r)
			}
		}
	}
	var out []*v3.Response
	for _, r := range append([]*v3.Response{ok200, ok201}, append(rest, wild)...) {
		if r != nil {
			out = append(out, r)
		}
	}
	if len(out) == 0 && op.Responses.Default != nil {
		out = append(out, op.Responses.Default)
	}
	return out
}

// responses checks that a successful call returns something a tool can
// return (JSON, text, or nothing) and builds the Accept header.
func (b *builder) responses(op *v3.Operation) (accept, reason string) {
	var accepted, refused []string
	usable := false
	for _, r := range successResponses(op) {
		if r.Content == nil || r.Content.Len() == 0 {
			usable = true
			continue
		}
		for mt := range r.Content.KeysFromOldest() {
			switch {
			case isJSON(mt) || isText(mt) || mediaBase(mt) == "*/*":
				usable = true
				if !slices.Contains(accepted, mt) && mediaBase(mt) != "*/*" {
					accepted = append(accepted, mt)
				}
			case !slices.Contains(refused, mt):
				refused = append(refused, mt)
			}
		}
	}
	if !usable && len(refused) > 0 {
		kind := "binary"
		if slices.ContainsFunc(refused, isStream) {
			kind = "streaming"
		}
		return "", fmt.Sprintf("%s response (%s) is not supported (only JSON and text)", kind, strings.Join(refused, ", "))
	}
	if len(accepted) == 0 {
		return "application/json, text/plain;q=0.9, */*;q=0.8", ""
	}
	return strings.Join(accepted, ", "), ""
}

// server picks the URL an operation is sent to, before Options.BaseURL.
func (b *builder) server(item *v3.PathItem, op *v3.Operation) string {
	servers := op.Servers
	if len(servers) == 0 {
		servers = item.Servers
	}
	if len(servers) == 0 {
		servers = b.doc.Servers
	}
	if len(servers) == 0 || servers[0] == nil {
		return ""
	}
	s := servers[0]
	return templateVar.ReplaceAllStringFunc(s.URL, func(m string) string {
		if s.Variables != nil {
			if v, ok := s.Variables.Get(m[1 : len(m)-1]); ok && v != nil {
				return v.Default
			}
		}
		return m
	})
}

// schemaNode returns the raw "schema" node of a parameter or media type
// object as written, so the converter sees references with their siblings
// (and broken ones, which libopenapi drops). ref is the fallback for an
// object libopenapi built without its node.
func schemaNode(root *yaml.Node, ref low.NodeReference[*lowbase.SchemaProxy]) *yaml.Node {
	if root != nil {
		return mapValue(deAlias(root), "schema")
	}
	if ref.IsReference() {
		if n := ref.GetReferenceNode(); n != nil && n.Kind == yaml.MappingNode {
			return n
		}
	}
	return ref.ValueNode
}

// --- media types ---

func mediaBase(mt string) string {
	if t, _, err := mime.ParseMediaType(mt); err == nil {
		return t
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// isJSON: application/json and any */*+json type.
func isJSON(mt string) bool {
	t := mediaBase(mt)
	return t == "application/json" || strings.HasSuffix(t, "+json")
}

// isText: what a tool returns as a string.
func isText(mt string) bool {
	t := mediaBase(mt)
	if isStream(t) {
		return false
	}
	switch {
	case strings.HasPrefix(t, "text/"), strings.HasSuffix(t, "+xml"), t == "application/xml",
		t == "application/yaml", t == "application/x-yaml", t == "application/javascript",
		t == "application/x-ndjson", t == "application/jsonl":
		return true
	}
	return false
}

func isStream(mt string) bool {
	t := mediaBase(mt)
	return t == "text/event-stream" || strings.HasPrefix(t, "multipart/x-mixed-replace")
}

type mediaMap = *orderedmap.Map[string, *v3.MediaType]

// firstMedia returns the first media type that ok accepts.
func firstMedia(content mediaMap, ok func(string) bool) (string, *v3.MediaType) {
	for mt := range content.KeysFromOldest() {
		if ok(mt) {
			if m := content.GetOrZero(mt); m != nil {
				return mt, m
			}
		}
	}
	return "", nil
}

func mediaList(content mediaMap) string {
	var out []string
	for mt := range content.KeysFromOldest() {
		out = append(out, mt)
	}
	return strings.Join(out, ", ")
}
