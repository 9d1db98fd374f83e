package openapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codemode-go/codemode"
)

// maxSummary bounds the part of an error response a tool error shows.
const maxSummary = 300

// result turns a successful response body into the tool's value: JSON as
// it is, text as a string, nothing as null.
func result(contentType string, body []byte, red *redactor) (any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	switch {
	case isJSON(contentType) || contentType == "":
		if json.Valid(body) {
			return red.redactJSON(body), nil
		}
	case isText(contentType):
		return red.redact(strings.ToValidUTF8(string(body), "\uFFFD")), nil
	}
	// An undeclared or mislabelled type: take it for what it is.
	if json.Valid(body) {
		return red.redactJSON(body), nil
	}
	if utf8.Valid(body) && !bytes.ContainsRune(body, 0) {
		return red.redact(string(body)), nil
	}
	return nil, codemode.ToolErrorf("the response is binary (%s, %d bytes), which a tool cannot return", orUnknown(contentType), len(body))
}

func orUnknown(ct string) string {
	if ct == "" {
		return "no content type"
	}
	return ct
}

// summary is the bounded, cleaned, redacted gist of an error response: the
// message field of a JSON error when there is one, else the start of the
// body, else the status text.
func summary(status int, body []byte, red *redactor) string {
	s := ""
	var v any
	if json.Unmarshal(body, &v) == nil {
		s = messageOf(v, 0)
		if s == "" {
			s = strings.TrimSpace(string(body))
		}
	} else if utf8.Valid(body) {
		s = string(body)
	}
	s = clean(red.redact(s), maxSummary)
	if s == "" {
		s = http.StatusText(status)
	}
	if s == "" {
		s = "no details"
	}
	return s
}

// messageOf finds the human message in common JSON error shapes:
// {"message"}, {"error": "..."}, {"error": {"message"}}, {"detail"},
// {"title"}, {"error_description"}, {"errors": [{"message"}]}.
func messageOf(v any, depth int) string {
	if depth > 3 {
		return ""
	}
	switch x := v.(type) {
	case map[string]any:
		for _, k := range []string{"message", "error_description", "detail", "title", "error", "errors", "msg", "description"} {
			if m := messageOf(x[k], depth+1); m != "" {
				if k == "title" {
					if d := messageOf(x["detail"], depth+1); d != "" {
						return m + ": " + d
					}
				}
				return m
			}
		}
	case []any:
		if len(x) > 0 {
			return messageOf(x[0], depth+1)
		}
	case string:
		return x
	}
	return ""
}

// clean removes control characters, collapses white space and bounds the
// length (in characters).
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max]) + "…"
	}
	return s
}

// redactor removes the secrets a call sent from anything that goes back
// to the program.
type redactor struct {
	secrets []string // longest first, so a secret inside another is not half-replaced
}

const redacted = "[REDACTED]"

func newRedactor(secrets []string) *redactor {
	r := &redactor{}
	for _, s := range secrets {
		if len(s) < 4 { // too short to find without mangling unrelated text
			continue
		}
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s), escape(s, false)} {
			if !containsExact(r.secrets, form) {
				r.secrets = append(r.secrets, form)
			}
		}
	}
	// Longest first.
	for i := 1; i < len(r.secrets); i++ {
		for j := i; j > 0 && len(r.secrets[j]) > len(r.secrets[j-1]); j-- {
			r.secrets[j], r.secrets[j-1] = r.secrets[j-1], r.secrets[j]
		}
	}
	return r
}

func containsExact(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (r *redactor) redact(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, redacted)
	}
	return s
}

// redactJSON redacts a JSON body. A secret is replaced only where it
// leaves the JSON valid; if it cannot be, the body goes back as redacted
// text rather than carry the secret.
func (r *redactor) redactJSON(body []byte) any {
	hit := false
	for _, sec := range r.secrets {
		if bytes.Contains(body, []byte(sec)) {
			hit = true
			break
		}
	}
	if !hit {
		return json.RawMessage(body)
	}
	out := []byte(r.redact(string(body)))
	if json.Valid(out) {
		return json.RawMessage(out)
	}
	return string(out)
}
