package openapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/pb33f/go-yaml"
	"github.com/pb33f/libopenapi/datamodel"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	lowbase "github.com/pb33f/libopenapi/datamodel/low/base"
	v3low "github.com/pb33f/libopenapi/datamodel/low/v3"
	"github.com/pb33f/libopenapi/index"

	"github.com/codemode-go/codemode"
)

// Options configure [FromSpec]. The zero value of every field means its
// documented default.
type Options struct {
	// BaseURL overrides every server of the document, e.g.
	// "https://api.example.com/v2"; operation paths are appended to it.
	// Empty means the document's servers: an operation's own servers win
	// over its path's, which win over the document's; the first server of
	// the winning list is used, with its variables at their defaults. A
	// server URL that is then relative or missing cannot be called: such a
	// tool fails with an error telling the host to set BaseURL.
	BaseURL string

	// Credentials resolves the credentials of the document's security
	// schemes at call time. Nil means anonymous only: operations that
	// require authentication fail with "no credentials available".
	Credentials CredentialFunc

	// HTTPClient sends the requests. Nil means a client with connect,
	// TLS-handshake and response-header timeouts. Either way the run's
	// context bounds every request, and redirects to another origin never
	// carry credentials (a given client is copied, not changed).
	HTTPClient *http.Client

	// MaxResponseBytes bounds a response body; a bigger one fails the call
	// with a tool error. Zero means 50 MiB.
	MaxResponseBytes int64

	// Headers are sent with every request (e.g. User-Agent). A header
	// parameter of the operation, and a credential, overrides the same
	// header given here. A header whose name suggests a credential (it
	// contains auth, key, token, secret, cookie, session, password, passwd
	// or credential, in any case) is treated like one: its value (and for
	// "Bearer x" or "Basic x" the credentials in it) is redacted from
	// results and messages, and it is not sent on after a redirect to
	// another origin.
	Headers http.Header
}

// DefaultMaxResponseBytes is the response bound when
// Options.MaxResponseBytes is zero.
const DefaultMaxResponseBytes = 50 << 20

// API is a converted document.
type API struct {
	// Title and Version are the document's info.title and info.version.
	Title, Version string

	// Namespace is a suggested namespace to mount Tools under, derived from
	// the title: its first word that is neither generic (api, rest,
	// openapi, swagger, the, web, ...) nor a version (v3, 2.0), lowercased
	// to [a-z0-9]; "api" when there is none. "GitHub v3 REST API" →
	// "github", "Swagger Petstore" → "petstore".
	Namespace string

	// Tools holds one tool per converted operation, as a tree to mount
	// under a namespace: codemode.Tools{api.Namespace: api.Tools}.
	Tools codemode.Tools

	// Skipped lists the operations that were not converted, in document
	// order, with the reason.
	Skipped []Skipped
}

// Skipped is an operation FromSpec did not convert.
type Skipped struct {
	// Operation is the operationId, or "METHOD /path" when there is none.
	Operation string
	// Reason says what made the operation unusable, e.g. "request body
	// media type multipart/mixed is not supported".
	Reason string
}

// CredentialFunc resolves the credential of one security scheme for one
// call. ctx is the call's context. Returning a zero Credential or
// ErrNoCredential means "not available": the call tries the operation's
// next security alternative. Any other error fails the call; its text is
// never shown to the program.
type CredentialFunc func(ctx context.Context, req CredentialRequest) (Credential, error)

// CredentialRequest describes the credential a call needs.
type CredentialRequest struct {
	// Scheme is the security scheme's name in components.securitySchemes.
	Scheme string
	// Type is "bearer" (http bearer, and oauth2 and openIdConnect, whose
	// tokens the host obtains), "basic" (http basic) or "apiKey".
	Type string
	// In is where an apiKey goes: "header" or "query".
	In string
	// Name is the apiKey's header or query parameter name.
	Name string
	// Scopes are the scopes the operation's security requirement lists
	// (oauth2 and openIdConnect).
	Scopes []string
	// Operation is the operationId, or "METHOD /path" when there is none.
	Operation string
}

// Credential is what a CredentialFunc returns. A bearer scheme uses Token
// (or Key when Token is empty), basic uses Username and Password, and
// apiKey uses Key (or Token when Key is empty).
type Credential struct {
	Token              string
	Username, Password string
	Key                string
}

// ErrNoCredential is returned by a CredentialFunc that has no credential
// for a request, so that the next security alternative is tried.
var ErrNoCredential = errors.New("openapi: no credential available")

// FromSpec converts an OpenAPI 3.0, 3.1 or 3.2 document, JSON or YAML, into
// tools. The conversion rules are in the package documentation. It never
// reads anything but spec: references to other files or URLs are left
// unresolved. A Swagger 2.0 document, a malformed one or a bad Options
// field is an error; no input makes it panic.
func FromSpec(spec []byte, opts Options) (api *API, err error) {
	// libopenapi is large and its parser meets hostile input here; a
	// panic in it must not take the host down.
	defer func() {
		if r := recover(); r != nil {
			api, err = nil, fmt.Errorf("openapi: the document could not be read (parser failure: %v)", r)
		}
	}()
	return fromSpec(spec, opts)
}

func fromSpec(spec []byte, opts Options) (*API, error) {
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("openapi: Options.BaseURL %q must be an absolute http or https URL", opts.BaseURL)
		}
	}
	if opts.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("openapi: Options.MaxResponseBytes %d is negative", opts.MaxResponseBytes)
	}
	doc, root, oas30, err := load(spec)
	if err != nil {
		return nil, err
	}
	conv := newConverter(root, oas30)
	conv.named = true
	b := newBuilder(doc, conv, opts)
	api := &API{Namespace: "api", Tools: codemode.Tools{}}
	if doc.Info != nil {
		api.Title, api.Version = strings.TrimSpace(doc.Info.Title), strings.TrimSpace(doc.Info.Version)
		api.Namespace = namespaceFor(api.Title)
	}
	b.build(api)
	return api, nil
}

// load parses and checks the document.
func load(spec []byte) (doc *v3.Document, root *yaml.Node, oas30 bool, err error) {
	if strings.TrimSpace(string(spec)) == "" {
		return nil, nil, false, errors.New("openapi: the document is empty")
	}
	cfg := datamodel.NewDocumentConfiguration()
	// The default logger writes to stdout, which belongs to the host.
	cfg.Logger = slog.New(slog.DiscardHandler)
	// Never read files or URLs: the document is untrusted input and the
	// converter stays offline.
	cfg.AllowFileReferences = false
	cfg.AllowRemoteReferences = false
	cfg.SkipExternalRefResolution = true
	// Schemas are read from the raw nodes (schema.go), which handles
	// reference siblings itself.
	cfg.TransformSiblingRefs = false
	cfg.MergeReferencedProperties = false
	info, err := datamodel.ExtractSpecInfoWithConfig(spec, cfg)
	if err != nil {
		if isSwagger2(spec) {
			return nil, nil, false, errSwagger2
		}
		return nil, nil, false, fmt.Errorf("openapi: not a readable OpenAPI 3 document: %w", err)
	}
	if info == nil || info.RootNode == nil {
		return nil, nil, false, errors.New("openapi: not a readable OpenAPI 3 document")
	}
	switch info.SpecFormat {
	case datamodel.OAS2:
		return nil, nil, false, errSwagger2
	case datamodel.OAS3, datamodel.OAS31, datamodel.OAS32:
		if !strings.HasPrefix(info.Version, "3.0") && !strings.HasPrefix(info.Version, "3.1") && !strings.HasPrefix(info.Version, "3.2") {
			return nil, nil, false, fmt.Errorf("openapi: OpenAPI version %q is not supported (3.0, 3.1 and 3.2 are)", info.Version)
		}
	default:
		return nil, nil, false, fmt.Errorf("openapi: not an OpenAPI 3 document (version %q)", info.Version)
	}
	// The model is built from libopenapi's packages directly, as its
	// Document.BuildV3Model does: the top-level package also links the
	// document differ and the Swagger 2 model, which the command would
	// carry for nothing.
	low, err := v3low.CreateDocumentFromConfig(info, cfg)
	defer lowbase.SchemaQuickHashMap.Clear()
	if low == nil {
		if err == nil {
			err = errors.New("no model")
		}
		return nil, nil, false, fmt.Errorf("openapi: the document is not valid OpenAPI %s: %w", info.Version, firstErrors(err, 5))
	}
	// Broken references stop the build; circular ones (the usual other
	// errors) leave a usable model, and the schema converter bounds
	// recursion itself.
	for _, e := range unwrapAll(err) {
		var refErr *index.ResolvingError
		if errors.As(e, &refErr) && refErr.CircularReference == nil {
			return nil, nil, false, fmt.Errorf("openapi: the document is not valid OpenAPI %s: %w", info.Version, firstErrors(err, 5))
		}
	}
	m := v3.NewDocument(low)
	return m, deAlias(info.RootNode), info.SpecFormat == datamodel.OAS3, nil
}

var errSwagger2 = errors.New("openapi: Swagger 2.0 documents are not supported; convert the document to OpenAPI 3 first (for example with swagger2openapi or editor.swagger.io)")

// isSwagger2 recognizes a Swagger document that libopenapi refused to read
// at all, so the error can say what to do.
func isSwagger2(spec []byte) bool {
	var probe struct {
		Swagger any `yaml:"swagger"`
	}
	if yaml.Unmarshal(spec, &probe) != nil || probe.Swagger == nil {
		return false
	}
	return strings.HasPrefix(fmt.Sprint(probe.Swagger), "2")
}

// firstErrors keeps a joined error readable: libopenapi reports every
// broken reference separately.
func firstErrors(err error, n int) error {
	errs := unwrapAll(err)
	if len(errs) <= n {
		return err
	}
	return fmt.Errorf("%w (and %d more errors)", errors.Join(errs[:n]...), len(errs)-n)
}

// unwrapAll flattens joined errors into their leaves; nil has none.
func unwrapAll(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range j.Unwrap() {
			errs = append(errs, unwrapAll(e)...)
		}
		return errs
	}
	return []error{err}
}
