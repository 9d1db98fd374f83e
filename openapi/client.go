package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/origin"
	"github.com/codemode-go/codemode/internal/redact"
)

// client is the HTTP side shared by the tools of one API.
type client struct {
	opts    Options
	http    *http.Client
	base    *url.URL // Options.BaseURL, parsed; nil when unset
	maxBody int64
	static  applied // the credentials among Options.Headers
}

func newClient(opts Options) *client {
	c := &client{opts: opts, maxBody: opts.MaxResponseBytes}
	if c.maxBody == 0 {
		c.maxBody = DefaultMaxResponseBytes
	}
	if opts.BaseURL != "" {
		c.base, _ = url.Parse(opts.BaseURL) // checked by FromSpec
	}
	// Hosts put API keys in static headers too; those get the same care
	// as the security schemes' credentials.
	for name, vs := range opts.Headers {
		if !redact.SensitiveName(name) {
			continue
		}
		c.static.headers = append(c.static.headers, name)
		for _, v := range vs {
			c.static.secrets = append(c.static.secrets, redact.HeaderSecrets(v)...)
		}
	}
	var hc http.Client
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient // a copy: the host's client is not changed
	} else {
		hc = http.Client{
			Timeout: 2 * time.Minute,
			Transport: &http.Transport{
				Proxy:                 http.ProxyFromEnvironment,
				DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
				TLSHandshakeTimeout:   10 * time.Second,
				ResponseHeaderTimeout: time.Minute,
				IdleConnTimeout:       90 * time.Second,
				MaxIdleConnsPerHost:   8,
				ForceAttemptHTTP2:     true,
			},
		}
	}
	hc.CheckRedirect = stripOnRedirect(hc.CheckRedirect)
	c.http = &hc
	return c
}

// maxErrorBody bounds what is read of an error response.
const maxErrorBody = 64 << 10

type appliedKey struct{}

// stripOnRedirect wraps a CheckRedirect so that a redirect to another
// origin (scheme, host or port) carries no credential: Go itself drops
// Authorization and Cookie only for a different domain, and knows nothing
// of API-key headers or query parameters.
func stripOnRedirect(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if next == nil && len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if !origin.Same(req.URL, via[0].URL) {
			req.Header.Del("Authorization")
			req.Header.Del("Proxy-Authorization")
			req.Header.Del("Cookie")
			// Go sets Referer to the previous URL, query key included.
			req.Header.Del("Referer")
			if a, _ := req.Context().Value(appliedKey{}).(*applied); a != nil {
				for _, h := range a.headers {
					req.Header.Del(h)
				}
				req.URL.RawQuery = dropQuery(req.URL.RawQuery, a)
			}
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
}

// dropQuery removes credential parameters, and any parameter whose value
// is a secret, from a raw query (a server may echo them into Location).
func dropQuery(raw string, a *applied) string {
	var keep []string
	for _, pair := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(pair, "=")
		dk, _ := url.QueryUnescape(k)
		dv, _ := url.QueryUnescape(v)
		if slices.Contains(a.query, dk) || (dv != "" && slices.Contains(a.secrets, dv)) {
			continue
		}
		keep = append(keep, pair)
	}
	return strings.Join(keep, "&")
}

// tool wraps the operation as a codemode.Tool.
func (o *operation) tool(desc string, output *jsonschema.Schema, types *codemode.Types) codemode.Tool {
	in := o.inputSchema()
	// The runtime validates the input against this schema before Run;
	// should a schema ever not resolve, Run still refuses unknown fields
	// and the HTTP API validates the rest. With named types the runtime
	// resolves it on the first call, with the types it uses.
	var err error
	if types == nil {
		_, err = in.Resolve(nil)
	}
	return codemode.Tool{
		Types:               types,
		Description:         desc,
		Input:               in,
		Output:              output,
		Run:                 o.run,
		SkipInputValidation: err != nil,
		Annotations:         methodAnnotations(o.method),
	}
}

// methodAnnotations are what HTTP says of a method (RFC 9110, section
// 9.2): GET, HEAD and OPTIONS are safe, PUT and DELETE idempotent, and
// DELETE removes. POST and PATCH may do anything, which is what no
// annotations say. Whether the service reaches beyond itself, HTTP does
// not tell.
func methodAnnotations(method string) *codemode.Annotations {
	switch strings.ToUpper(method) {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return &codemode.Annotations{ReadOnly: true, Idempotent: true}
	case "PUT":
		return &codemode.Annotations{Idempotent: true}
	case "DELETE":
		return &codemode.Annotations{Destructive: true, Idempotent: true}
	}
	return nil
}

// run performs one call.
func (o *operation) run(ctx context.Context, raw json.RawMessage) (any, error) {
	req, err := o.request(ctx, raw)
	if err != nil {
		return nil, err
	}
	a, err := o.authorize(ctx, req)
	if err != nil {
		return nil, err
	}
	a.headers = append(a.headers, o.c.static.headers...)
	a.secrets = append(a.secrets, o.c.static.secrets...)
	red := redact.New(a.secrets...)
	resp, err := o.c.http.Do(req.WithContext(context.WithValue(ctx, appliedKey{}, a)))
	if err != nil {
		return nil, o.networkError(ctx, req, err, red)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Only the start of an error body is shown, so only the start is
		// read; a body cut short by the network still has its status.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, min(o.c.maxBody, maxErrorBody)))
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, codemode.ToolErrorf("HTTP %d: %s", resp.StatusCode, summary(resp.StatusCode, body, red))
	}
	if resp.ContentLength > o.c.maxBody {
		return nil, codemode.ToolErrorf("the response is too large (%d bytes; the limit is %d)", resp.ContentLength, o.c.maxBody)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, o.c.maxBody+1))
	if err != nil {
		return nil, o.networkError(ctx, req, err, red)
	}
	if int64(len(body)) > o.c.maxBody {
		return nil, codemode.ToolErrorf("the response is too large (more than %d bytes)", o.c.maxBody)
	}
	return result(resp.Header.Get("Content-Type"), body, red)
}

// request builds the HTTP request from the input (credentials come later).
func (o *operation) request(ctx context.Context, raw json.RawMessage) (*http.Request, error) {
	var input map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, &input); err != nil || input == nil {
		return nil, codemode.ToolError("the input must be an object")
	}
	for k := range input {
		if !slices.ContainsFunc(o.fields, func(f field) bool { return f.key == k }) {
			return nil, codemode.ToolErrorf("unknown input property %q (expected: %s)", k, strings.Join(o.keys(), ", "))
		}
	}
	base, err := o.baseURL()
	if err != nil {
		return nil, err
	}
	paths := map[string]string{} // parameter name → its segment text, escaped
	var query []string
	headers := http.Header{}
	var bodyVals []bodyValue
	for i, f := range o.fields {
		rawv, present := input[f.key]
		if !present || (f.in != "body" && string(rawv) == "null") {
			if f.required {
				return nil, codemode.ToolErrorf("missing required input property %q", f.key)
			}
			continue
		}
		if f.in == "body" {
			bodyVals = append(bodyVals, bodyValue{&o.fields[i], rawv})
			continue
		}
		v, err := decodeValue(rawv)
		if err != nil {
			return nil, codemode.ToolErrorf("input property %q is not valid JSON", f.key)
		}
		switch f.in {
		case "path":
			seg := f.simple(v, pathEscape)
			if dotSegment(seg) {
				return nil, errDotSegment(f.key)
			}
			paths[f.name] = seg
		case "query":
			query = append(query, f.queryPairs(v)...)
		case "header":
			hv, err := f.headerValue(v)
			if err != nil {
				return nil, err
			}
			headers.Set(f.name, hv)
		}
	}
	path, err := o.fillPath(paths)
	if err != nil {
		return nil, err
	}
	// The body is written before anything is sent, so that an input it
	// cannot take (a file that is not base64) fails the call here.
	payload, contentType, err := o.payload(bodyVals)
	if err != nil {
		return nil, err
	}
	b := *base
	b.RawQuery, b.Fragment = "", ""
	u := strings.TrimSuffix(b.String(), "/") + path
	if base.RawQuery != "" {
		query = append([]string{base.RawQuery}, query...)
	}
	if len(query) > 0 {
		u += "?" + strings.Join(query, "&")
	}
	target, err := url.Parse(u)
	if err != nil {
		return nil, codemode.ToolError("the input makes an invalid URL")
	}
	var rd io.Reader
	if contentType != "" {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, o.method, target.String(), rd)
	if err != nil {
		return nil, codemode.ToolError("the input makes an invalid request")
	}
	for k, vs := range o.c.opts.Headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	for k, vs := range headers {
		req.Header[k] = vs
	}
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", o.accept)
	return req, nil
}

func (o *operation) keys() []string {
	out := make([]string, 0, len(o.fields))
	for _, f := range o.fields {
		out = append(out, f.key)
	}
	return out
}

// baseURL is Options.BaseURL, else the operation's server.
func (o *operation) baseURL() (*url.URL, error) {
	if o.c.base != nil {
		return o.c.base, nil
	}
	u, err := url.Parse(o.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if o.server == "" {
			return nil, codemode.ToolError("the API document names no server; the host has to set openapi.Options.BaseURL")
		}
		return nil, codemode.ToolErrorf("the API's server URL %q is not an absolute http(s) URL; the host has to set openapi.Options.BaseURL", o.server)
	}
	return u, nil
}

// networkError reports a failed exchange without the URL's query (where
// credentials may be) or any secret. A cancelled or expired run is not the
// API's failure: its own error is returned, which the runtime reports.
func (o *operation) networkError(ctx context.Context, req *http.Request, err error, red *redact.Redactor) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	what := "failed"
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		what = "timed out"
	}
	u := *req.URL
	u.RawQuery, u.User, u.Fragment = "", nil, ""
	detail := clean(err.Error(), 200, red)
	return codemode.ToolErrorf("%s %s %s: %s", o.method, u.String(), what, detail)
}
