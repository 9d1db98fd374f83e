package redact

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

// secret has the characters encoders treat differently: "/" (escaped as
// "\/" by PHP and Symfony), "+" and "=" (base64, form encoding), a space
// ("+" or "%20"), a quote, a backslash and a non-ASCII letter; and its
// base64 holds "+" and "/", where the standard and URL-safe alphabets
// differ.
const secret = `sk/live+Zq="x\y é?>~~`

// encodings are the ways an upstream may echo a secret.
var encodings = []struct {
	name string
	enc  func(string) string
}{
	{"raw", func(s string) string { return s }},
	{"JSON", func(s string) string { b, _ := json.Marshal(s); return string(b) }},
	{"JSON with \\/", func(s string) string {
		b, _ := json.Marshal(s)
		return strings.ReplaceAll(string(b), "/", `\/`)
	}},
	{"JSON ASCII-only lower hex", func(s string) string { return asciiJSON(s, "\\u%04x") }},
	{"JSON ASCII-only upper hex", func(s string) string { return asciiJSON(s, "\\u%04X") }},
	{"JSON every byte escaped", func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, "\\u%04x", r)
		}
		return b.String()
	}},
	{"JS \\x escapes", func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			fmt.Fprintf(&b, "\\x%02x", s[i])
		}
		return b.String()
	}},
	{"query escape (+ for space)", url.QueryEscape},
	{"path escape", url.PathEscape},
	{"every byte %XX upper", func(s string) string { return pctAll(s, "%%%02X") }},
	{"every byte %xx lower", func(s string) string { return pctAll(s, "%%%02x") }},
	{"double percent-encoding", func(s string) string { return url.QueryEscape(url.QueryEscape(s)) }},
	{"URL-encoded inside JSON", func(s string) string {
		b, _ := json.Marshal("https://x.test/?k=" + url.QueryEscape(s))
		return strings.ReplaceAll(string(b), "/", `\/`)
	}},
	{"HTML", html.EscapeString},
	{"HTML numeric", func(s string) string {
		var b strings.Builder
		for _, r := range s {
			fmt.Fprintf(&b, "&#x%X;", r)
		}
		return b.String()
	}},
	{"hex", func(s string) string { return hex.EncodeToString([]byte(s)) }},
	{"HEX", func(s string) string { return strings.ToUpper(hex.EncodeToString([]byte(s))) }},
	{"base64", func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }},
	{"base64 unpadded", func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) }},
	{"base64url", func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }},
	{"base64url unpadded", func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }},
	{"base64 of user:secret (Basic)", func(s string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+s))
	}},
	{"base64url inside a longer blob, offset 1", func(s string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(`{"a":"` + s + `","b":1}`))
	}},
	{"base64 inside a longer blob, offset 2", func(s string) string {
		return base64.StdEncoding.EncodeToString([]byte(`ab` + s + `cdefgh`))
	}},
	{"base64 then URL-encoded", func(s string) string {
		return url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(s)))
	}},
}

func asciiJSON(s, format string) string {
	b, _ := json.Marshal(s)
	var out strings.Builder
	for _, r := range string(b) {
		if r > 0x7e {
			fmt.Fprintf(&out, format, r)
			continue
		}
		out.WriteRune(r)
	}
	return out.String()
}

func pctAll(s, format string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}

// leaks reports which encodings of secret text still holds.
func leaks(text, secret string) []string {
	var found []string
	for _, e := range encodings {
		if f := e.enc(secret); strings.Contains(text, f) {
			found = append(found, e.name)
		}
	}
	// Base64 inside a longer blob: the part that depends only on the secret.
	for offset := range 3 {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			if c := core(enc, []byte(secret), offset); len(c) >= minEncoded && strings.Contains(text, c) {
				found = append(found, fmt.Sprintf("base64 core at offset %d", offset))
			}
		}
	}
	return found
}

func TestStringEncodings(t *testing.T) {
	r := New(secret)
	for _, e := range encodings {
		t.Run(e.name, func(t *testing.T) {
			in := "before " + e.enc(secret) + " after"
			got := r.String(in)
			if l := leaks(got, secret); len(l) > 0 {
				t.Fatalf("String(%q) = %q, which still holds the secret as %v", in, got, l)
			}
			if !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after") || !strings.Contains(got, Mark) {
				t.Errorf("String(%q) = %q, want the text around the secret kept and %s in its place", in, got, Mark)
			}
		})
	}
}

func TestStringKeepsOrdinaryText(t *testing.T) {
	r := New("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "hunter22")
	for _, s := range []string{
		"",
		"nothing to see here",
		"sk_live_ is a prefix, hunter2 is shorter",
		`{"escaped": "\u00e9\/\"", "pct": "%2F%zz%", "amp": "&amp; &#; &#x; &bogus;"}`,
		`\`, `%`, `&`, `\u12`, `&#x110000;`, `\uD800`,
		strings.Repeat("A", 5000),
	} {
		if got := r.String(s); got != s {
			t.Errorf("String(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestStringOverlappingSecrets(t *testing.T) {
	r := New("abcdef", "defghi")
	if got, want := r.String("xxabcdefghixx"), "xx"+Mark+"xx"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := New("abcd").String("abcdabcd abcd"), Mark+" "+Mark; got != want && got != Mark+Mark+" "+Mark {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestShortSecrets(t *testing.T) {
	r := New("abc", "", "   ", "abcd")
	if got, want := r.String("abc abcd"), "abc "+Mark; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !New("ab").Empty() || !New().Empty() || (*Redactor)(nil).String("x") != "x" {
		t.Error("a redactor without usable secrets changes text")
	}
}

func TestJSON(t *testing.T) {
	r := New(secret)
	for _, tc := range []struct {
		name, in string
		valid    bool
	}{
		{"escaped slash", `{"auth": "Bearer ` + strings.ReplaceAll(jsonInner(secret), "/", `\/`) + `", "n": 1}`, true},
		{"key and value", `{"` + jsonInner(secret) + `": ["` + url.QueryEscape(secret) + `"]}`, true},
		{"nested JSON text", `{"body": ` + mustJSON(`{"token":"`+jsonInner(secret)+`"}`) + `}`, true},
		{"base64 blob", `{"blob": "` + base64.StdEncoding.EncodeToString([]byte("xx"+secret+"yyyy")) + `"}`, true},
		{"number", `{"pin": 12345678901}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := r
			if tc.name == "number" {
				rr = New("12345678901")
			}
			out, valid := rr.JSON([]byte(tc.in))
			if valid != tc.valid || (valid && !json.Valid(out)) {
				t.Fatalf("JSON(%s) = %s, valid %v; want valid %v", tc.in, out, valid, tc.valid)
			}
			if tc.name != "number" {
				if l := leaks(string(out), secret); len(l) > 0 {
					t.Fatalf("JSON(%s) = %s, which still holds the secret as %v", tc.in, out, l)
				}
			} else if strings.Contains(string(out), "12345678901") {
				t.Fatalf("JSON(%s) = %s, which still holds the secret", tc.in, out)
			}
		})
	}
	in := []byte(`{"a": "b", "c": [1, 2.5e3, null]}`)
	if out, valid := r.JSON(in); !valid || &out[0] != &in[0] {
		t.Errorf("JSON without a secret = %s, %v; want the input itself", out, valid)
	}
}

func jsonInner(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestValue(t *testing.T) {
	r := New(secret)
	in := map[string]any{
		"plain": "ok",
		"list":  []any{1.0, "x " + secret, json.RawMessage(`{"t":"` + jsonInner(secret) + `"}`)},
		secret:  true,
	}
	out := r.Value(in)
	b, _ := json.Marshal(out)
	if l := leaks(string(b), secret); len(l) > 0 {
		t.Fatalf("Value = %s, which still holds the secret as %v", b, l)
	}
	if in["list"].([]any)[1] != "x "+secret {
		t.Error("Value changed its input")
	}
	same := map[string]any{"a": []any{"b"}}
	if got := r.Value(same); fmt.Sprintf("%p", got) != fmt.Sprintf("%p", same) {
		t.Error("Value copied a map without secrets")
	}
	type typed struct{ Token string }
	if b, _ := json.Marshal(r.Value(typed{secret})); strings.Contains(string(b), "live") {
		t.Errorf("Value(struct) = %s, want the token redacted", b)
	}
}

func TestError(t *testing.T) {
	r := New(secret)
	base := fmt.Errorf("dial %s: %w", url.QueryEscape(secret), context.DeadlineExceeded)
	err := r.Error(base)
	if strings.Contains(err.Error(), url.QueryEscape(secret)) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Error = %q (Is deadline: %v), want it redacted and still a deadline error", err, errors.Is(err, context.DeadlineExceeded))
	}
	plain := errors.New("nothing secret")
	if got := r.Error(plain); got != plain {
		t.Errorf("Error(%v) = %v, want it unchanged", plain, got)
	}
}

func TestHandler(t *testing.T) {
	var b strings.Builder
	log := slog.New(Handler(slog.NewTextHandler(&b, nil), New(secret)))
	log = log.With("header", "Bearer "+secret)
	log.WithGroup("g").Info("saw "+url.QueryEscape(secret),
		"err", fmt.Errorf("got %q", secret),
		"n", 3,
		slog.Group("inner", "v", base64.StdEncoding.EncodeToString([]byte(secret))),
		"stringer", url.URL{Host: "h", RawQuery: "k=" + url.QueryEscape(secret)})
	if l := leaks(b.String(), secret); len(l) > 0 {
		t.Fatalf("log %q still holds the secret as %v", b.String(), l)
	}
	for _, want := range []string{"n=3", "inner.v=" + Mark} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("log %q does not hold %q", b.String(), want)
		}
	}
}

func TestHeaderSecrets(t *testing.T) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("sk_live_123:"))
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"abc", []string{"abc"}},
		{"Bearer tok", []string{"Bearer tok", "tok"}},
		{basic, []string{basic, base64.StdEncoding.EncodeToString([]byte("sk_live_123:")), "sk_live_123:", "sk_live_123", ""}},
	} {
		if got := HeaderSecrets(tc.in); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("HeaderSecrets(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestURLSecrets(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"postgresql://user:pass-1@db/x", []string{"pass-1"}},
		{"--db=postgres://u:p%40ss@h/d?sslmode=require", []string{"p%40ss", "p@ss"}},
		{"https://ghp_token@github.com/o/r.git", []string{"ghp_token"}},
		{"https://sk_live_key:@api.example.com", []string{"sk_live_key"}},
		{"redis://:only-pass@h", []string{"only-pass"}},
		{"a https://u:one@h/x and amqp://g:two@h2", []string{"one", "two"}},
		{"http://u:p@ss-with-at@h/x", []string{"p@ss-with-at"}}, // the last @ ends it, as url.Parse reads it
		{"http://u:%zz@h", []string{"%zz"}},                     // not decodable: as written
		{"https://example.com/a@b", nil},                        // @ in the path
		{"https://example.com?to=a@b", nil},                     // @ in the query
		{"see https://example.com and mail a@b", nil},           // @ after the URL ended
		{"no url here: user:pass@host", nil},
		{"://@", nil},
		{"", nil},
	} {
		if got := URLSecrets(tc.in); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("URLSecrets(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSensitiveName(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "X-API-Key": true, "GITHUB_TOKEN": true, "Cookie": true, "DB_PASSWD": true,
		"AWS_SECRET_ACCESS_KEY": true, "User-Agent": false, "PATH": false, "LOG_LEVEL": false,
	} {
		if got := SensitiveName(name); got != want {
			t.Errorf("SensitiveName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestCore: the core of every offset is inside the base64 of any input
// that holds the secret at that offset.
func TestCore(t *testing.T) {
	b := []byte(secret)
	for offset := range 3 {
		for _, pre := range []string{"", "abc", "abcdef"} {
			for _, post := range []string{"", "x", "xy", "xyz"} {
				in := append(append([]byte(pre+strings.Repeat("p", offset)), b...), post...)
				for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
					if c, e := core(enc, b, offset), enc.EncodeToString(in); !strings.Contains(e, c) {
						t.Errorf("offset %d: core %q not in %q", offset, c, e)
					}
				}
			}
		}
	}
}
