// Package openapi turns an OpenAPI 3.0, 3.1 or 3.2 document into codemode
// tools: one tool per operation, calling the API over HTTP with
// credentials the host supplies and the program never sees.
//
//	api, err := openapi.FromSpec(spec, openapi.Options{
//		Credentials: func(ctx context.Context, req openapi.CredentialRequest) (openapi.Credential, error) {
//			return openapi.Credential{Token: os.Getenv("GITHUB_TOKEN")}, nil
//		},
//	})
//	rt, err := codemode.New(codemode.Options{Tools: codemode.Tools{api.Namespace: api.Tools}})
//	// a program: await tools.github.repos.get({ owner: "golang", repo: "go" })
//
// # Names
//
// An operationId is split on "." and "/" into namespace levels
// ("v2.session.get" → v2.session.get, GitHub's "repos/get-content" →
// repos.getContent); within a level, every character that cannot be in a
// JavaScript identifier ("-", "_", space, ...) is a word break, and the
// words are joined in camelCase, the first keeping its case. A leading
// digit gets a "_" prefix; a name programs cannot use ("then", "toJSON";
// see codemode.CheckName) gets a "_" suffix, and a letter that does not
// show as itself (fullwidth ｒ, the ligature ﬁ) is spelled out ({U+FF52};
// codemode.SafeName). Without an operationId the name is the
// method and the path: GET /users/{id} → getUsersById. In document order,
// a name already taken by a tool, or by a namespace that other tools live
// in, gets the first free suffix _2, _3, ... (namespaces keep their names).
//
// # Input
//
// A tool takes one object. Its properties are the operation's path, query
// and header parameters (path, then query, then header) and then the
// request body (see Bodies for how each media type is sent): the
// properties of a plain JSON, form or multipart object body (type object with
// properties; not composed, nullable, open through additionalProperties
// or patternProperties, or conditionally required) stand beside the
// parameters; any other body is the single property "body". An optional
// body with required properties stays under "body" too, since its
// properties are required only when it is sent. A name used in more than
// one location is prefixed with its location everywhere it is used
// (path_id, query_id, body_id). Required-ness, descriptions, defaults,
// formats, enums and deprecation are carried over, and unknown properties
// are refused. readOnly properties are left out of request bodies, and
// writeOnly ones out of output schemas.
//
// Parameters use the styles OpenAPI defines: query form (explode or not,
// for primitives, arrays and objects) and deepObject, path and header
// simple; a parameter with JSON content is sent as JSON text. A path
// parameter is percent-encoded (everything but letters, digits and
// "-._~"), and a call is refused before anything is sent when the path
// segment a parameter makes is empty, or the value or its segment is a
// dot segment: "." or "..", also percent-encoded (once or more), as a
// piece between "/" or "\" in the value, or followed by ";". Servers
// that decode "%2F" and then resolve dot segments would otherwise send
// the call, and its credentials, to another endpoint. Values that merely
// hold dots ("a.b", "...", ".hidden") are sent as they are. Header
// parameters named Accept, Content-Type or Authorization are ignored, as
// the specification says. An optional cookie parameter is left out of the
// input; an operation that needs a cookie, another style (matrix, label,
// spaceDelimited, pipeDelimited), a request body it cannot send (see
// Bodies), or whose successful responses are only binary or streams, is
// not converted: it is listed in API.Skipped with the reason.
//
// # Bodies
//
// A request body offered in several media types is sent in the first of
// JSON (application/json and any +json type), then
// application/x-www-form-urlencoded, then multipart/form-data, then text
// (text/*, XML, YAML, or any type whose schema is a plain string), then
// any other type as raw bytes; among equals, in document order.
//
// A form body has a field per property, written as a query parameter of
// the style its encoding object gives would be: form and exploded by
// default (an array repeats the field, an object's members become
// fields), form unexploded (a=1,2), or deepObject (filter[color]=red).
// Primitives are sent as their text, a property whose encoding
// contentType is JSON (and that has no style) as JSON text, and a null
// property not at all. Reserved characters are always percent-encoded
// (allowReserved is not honoured: a "&" would start another field).
//
// A multipart body has a part per property, in schema order, named after
// it; a null property has none. A file, that is a string of format binary
// (or 3.0's base64), one with a contentMediaType or a contentEncoding
// (3.1), or any property whose encoding contentType is not a text type,
// takes an object { data: "<base64>", filename?: "...", contentType?:
// "..." }, as its input schema and signature say: data is base64
// (standard or URL-safe, padding optional), filename defaults to the
// property's name, and contentType to the encoding's contentType (its
// first type, when it lists several), else the contentMediaType, else
// application/octet-stream. A contentEncoding of base64 (or 3.0's format
// base64) sends the bytes base64-encoded, with Content-Transfer-Encoding:
// base64. An array of files, or of primitives, sends a part per item.
// Strings, numbers and booleans are text parts, with no Content-Type
// unless the encoding gives a text type; objects and other arrays are one
// application/json part (or the JSON type the encoding gives); a
// structured property whose encoding gives another text type (XML, CSV)
// takes that text as a string. A property without a type takes text or a
// file: OpenAPI's default part type for it is application/octet-stream,
// and such properties hold uploads in practice. Part headers the encoding
// declares are sent when their schema fixes a value (const, an enum of
// one, a default); Content-Type and Content-Disposition are the tool's.
//
// A text body is the property "body", a string sent as it is. Any other
// media type is a raw body: "body" is { data: "<base64>", contentType?:
// "..." }, sent as bytes with the declared type or the one given; a
// wildcard type (image/*) must be given. A file whose data is not base64,
// whose filename holds a control character or whose contentType is not a
// media type fails the call before anything is sent.
//
// A body none of whose media types can be sent (multipart/mixed and the
// other multipart types, a form or multipart schema that is not an
// object, a form property in another style, a part header that is
// required and has no fixed value) skips the operation, whether the body
// is required or not, with the reason in API.Skipped: a tool that cannot
// send what its API takes would have the model believe its calls did
// what they asked.
//
// # Schemas
//
// Schemas are converted to self-contained JSON Schema 2020-12: local
// references are expanded inline, OpenAPI 3.0's nullable and boolean
// exclusiveMinimum/Maximum are rewritten, and in 3.1 a reference's sibling
// keywords are laid over its target (3.0 ignores them). A reference is
// expanded at most twice along one path; deeper, a recursive schema is
// cut to {} with a description saying so. A schema is also cut past 24
// levels of nesting or 1,500 subschemas (breadth first, so the outer shape
// survives). References to other files or URLs are never fetched: they
// become {} with a note. A pattern Go's regexp cannot compile (lookaround,
// backreferences) moves into the description. The output schema is that
// of the first JSON response among 200, 201, the other 2xx codes, 2XX and,
// when there is no 2xx response, default.
//
// # Servers
//
// Options.BaseURL, when set, replaces every server. Otherwise the first
// server of the operation, else of its path, else of the document, with
// its variables at their defaults. A server URL that is relative or
// missing does not fail FromSpec, since the tools are still worth
// listing; calling such a tool fails with a tool error telling the host to
// set BaseURL.
//
// # Credentials
//
// Credentials never appear in an input schema, a signature, a result or
// an error message (see Responses for how that is kept). An operation's security requirements (its own, else
// the document's) are alternatives tried in order; every scheme of one
// alternative is needed; an empty requirement {} allows an anonymous call.
// Supported schemes: http bearer, http basic, apiKey in a header or the
// query, and oauth2 and openIdConnect, whose tokens the host obtains and
// which are sent as bearer tokens (the CredentialRequest carries the
// scopes). Alternatives with other schemes (apiKey in a cookie, http
// digest, mutualTLS) are dropped; an operation left with none is skipped.
// At call time the first alternative whose every scheme gets a credential
// from Options.Credentials is used; if none does and anonymous calls are
// not allowed, the call fails with "no credentials available for ...".
// A redirect to another origin (scheme, host or port) is followed without
// the Authorization, Cookie and Referer headers, the API-key headers or
// the API-key query parameters.
//
// # Responses
//
// A 2xx JSON response is returned as it is, a text response as a string,
// an empty one as null. Anything else fails the call with a tool error the
// program can read: HTTP errors as "HTTP 404: <message>" (the JSON error
// message when there is one, else the start of the body; at most 300
// characters, control characters removed), a response over
// Options.MaxResponseBytes, a binary response, a network failure (with the
// URL but never its query). Every secret sent with the request (a token,
// an API key, a basic username, password and "username:password" pair, a
// credential among Options.Headers) is replaced by [REDACTED] in whatever
// goes back, bodies and messages alike, in the forms an API may echo it
// in: raw; JSON-, JavaScript- or HTML-escaped ("\/", "\u00XX", "&#x2F;");
// percent-encoded in either case, with "+" for a space, up to three
// layers deep; hex; and base64, standard or URL-safe, padded or not, also
// inside a longer base64 string (the Basic header). Secrets shorter than
// four characters are not looked for, and a username that the API also
// returns as data is redacted there too. A JSON body stays valid JSON:
// the strings holding a secret are redacted and encoded again. A call
// cancelled by the run (its deadline, or a lost Promise.race) returns the
// context's error.
package openapi
