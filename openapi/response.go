package openapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/redact"
)

// maxSummary bounds the part of an error response a tool error shows.
const maxSummary = 300

// result turns a successful response body into the tool's value: JSON as
// it is, text as a string, nothing as null; every secret redacted.
func result(contentType string, body []byte, red *redact.Redactor) (any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	switch {
	case isJSON(contentType) || contentType == "":
		if json.Valid(body) {
			return redactJSON(body, red), nil
		}
	case isText(contentType):
		return red.String(strings.ToValidUTF8(string(body), "\uFFFD")), nil
	}
	// An undeclared or mislabelled type: take it for what it is.
	if json.Valid(body) {
		return redactJSON(body, red), nil
	}
	if utf8.Valid(body) && !bytes.ContainsRune(body, 0) {
		return red.String(string(body)), nil
	}
	// The content type is the upstream's text too.
	return nil, codemode.ToolErrorf("the response is binary (%s, %d bytes), which a tool cannot return", clean(orUnknown(contentType), 100, red), len(body))
}

// redactJSON redacts a JSON body. Where a secret cannot be taken out
// without breaking the JSON, the body goes back as redacted text rather
// than carry the secret.
func redactJSON(body []byte, red *redact.Redactor) any {
	out, valid := red.JSON(body)
	if !valid {
		return string(out)
	}
	return json.RawMessage(out)
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
func summary(status int, body []byte, red *redact.Redactor) string {
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
	s = clean(s, maxSummary, red)
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

// clean redacts the secrets, removes control characters, collapses white
// space and bounds the length (in characters). Redaction comes before the
// cut, which could otherwise halve a secret into a prefix nothing
// recognises (and a program that controls where the cut falls would learn
// all but its last character), and again after the clean-up, which could
// join a secret split by control characters.
func clean(s string, max int, red *redact.Redactor) string {
	s = red.String(strings.ToValidUTF8(s, "\uFFFD"))
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	s = red.String(s)
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max]) + "…"
	}
	return s
}
