package openapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

const echoSpec = `
openapi: 3.0.3
info: {title: Echo, version: "1"}
security: [{basic: []}]
paths:
  /echo/{mode}:
    get:
      operationId: echo
      parameters: [{name: mode, in: path, required: true, schema: {type: string}}]
      responses:
        "200":
          description: ok
          content:
            application/json: {schema: {}}
            text/plain: {schema: {type: string}}
components:
  securitySchemes:
    basic: {type: http, scheme: basic}
`

// echoed are the ways the echo server below repeats what it was sent:
// the encodings real servers use for text they did not expect to hold a
// secret. Each takes the username, the password, the pair and the whole
// Authorization header value.
var echoed = map[string]func(w http.ResponseWriter, user, pass, pair, header string){
	// PHP's json_encode and Symfony escape "/" as "\/" by default.
	"json-escaped-slashes": func(w http.ResponseWriter, user, pass, pair, header string) {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]string{"user": user, "pass": pass, "pair": pair, "header": header})
		_, _ = w.Write([]byte(strings.ReplaceAll(string(b), "/", `\/`)))
	},
	// Python's json.dumps with ensure_ascii, taken to the extreme.
	"json-unicode-escapes": func(w http.ResponseWriter, user, pass, pair, header string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"user": "%s", "pair": "%s"}`, uEscape(user), uEscape(pair))
	},
	"text-500": func(w http.ResponseWriter, user, pass, pair, header string) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(500)
		fmt.Fprintf(w, "Traceback: auth failed for user=%s password=%s (%s) header %s", user, pass, pair, header)
	},
	"json-401-message": func(w http.ResponseWriter, user, pass, pair, header string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		b, _ := json.Marshal("Invalid API key provided: " + user + " / " + pair)
		fmt.Fprintf(w, `{"error": {"message": %s}}`, strings.ReplaceAll(string(b), "/", `\/`))
	},
	"html-502": func(w http.ResponseWriter, user, pass, pair, header string) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(502)
		owasp := func(s string) string { return strings.ReplaceAll(html.EscapeString(s), "/", "&#x2F;") }
		fmt.Fprintf(w, "<p>%s</p><p>%s</p>", owasp(pair), owasp(header))
	},
	"url-encoded": func(w http.ResponseWriter, user, pass, pair, header string) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "https://x.test/cb?u=%s&p=%s&pair=%s&h=%s", url.QueryEscape(user), url.QueryEscape(pass), lowerPct(pair), url.PathEscape(header))
	},
	"base64": func(w http.ResponseWriter, user, pass, pair, header string) {
		w.Header().Set("Content-Type", "application/json")
		jwt := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." +
			base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"`+user+`","pwd":"`+pass+`"}`))
		b, _ := json.Marshal(map[string]string{
			"header":    header,
			"std":       base64.StdEncoding.EncodeToString([]byte(pair)),
			"url":       base64.URLEncoding.EncodeToString([]byte(pair)),
			"urlRaw":    base64.RawURLEncoding.EncodeToString([]byte(pair)),
			"jwt":       jwt,
			"userAlone": base64.StdEncoding.EncodeToString([]byte(user)),
		})
		_, _ = w.Write(b)
	},
}

func uEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, "\\u%04x", r)
	}
	return b.String()
}

func lowerPct(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02x", s[i])
	}
	return b.String()
}

// secretForms lists what must not reach the program for one secret: the
// secret and every encoding the echo server uses.
func secretForms(s string) []string {
	if len(s) < 4 {
		return nil
	}
	b, _ := json.Marshal(s)
	js := string(b[1 : len(b)-1])
	return []string{
		s, js, strings.ReplaceAll(js, "/", `\/`), uEscape(s),
		url.QueryEscape(s), url.PathEscape(s), lowerPct(s),
		html.EscapeString(s), strings.ReplaceAll(html.EscapeString(s), "/", "&#x2F;"),
		base64.StdEncoding.EncodeToString([]byte(s)), base64.RawStdEncoding.EncodeToString([]byte(s)),
		base64.URLEncoding.EncodeToString([]byte(s)), base64.RawURLEncoding.EncodeToString([]byte(s)),
	}
}

// TestEchoedCredentialsRedacted: whatever encoding a server echoes a
// basic credential in, in a success body or an error, nothing of it is in
// the Result a program's run produces, which is what the model sees.
func TestEchoedCredentialsRedacted(t *testing.T) {
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok {
			w.WriteHeader(400)
			return
		}
		echoed[strings.TrimPrefix(r.URL.Path, "/echo/")](w, user, pass, user+":"+pass, r.Header.Get("Authorization"))
	})
	for _, cred := range []struct {
		name string
		c    Credential
	}{
		// Stripe-style: the key is the username, the password empty.
		{"key as username", Credential{Username: "sk_live_4eC39Hq/LyjW+Darjt=T1zdp7dc"}},
		{"username and password", Credential{Username: "svc-account/eu", Password: "pw/with+plus=and space ok"}},
	} {
		api := convert(t, echoSpec, Options{BaseURL: srv.URL, Credentials: func(_ context.Context, _ CredentialRequest) (Credential, error) {
			return cred.c, nil
		}})
		pair := cred.c.Username + ":" + cred.c.Password
		header := "Basic " + base64.StdEncoding.EncodeToString([]byte(pair))
		var forbidden []string
		for _, s := range []string{cred.c.Username, cred.c.Password, pair, header} {
			forbidden = append(forbidden, secretForms(s)...)
		}
		for mode := range echoed {
			t.Run(cred.name+"/"+mode, func(t *testing.T) {
				res, _ := execute(t, api, 10*time.Second, `return await tools.api.echo({ mode: "`+mode+`" })`)
				whole, err := json.Marshal(res)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range forbidden {
					if strings.Contains(string(whole), f) {
						t.Fatalf("the result holds %q:\n%s", f, whole)
					}
				}
				if !strings.Contains(string(whole), "[REDACTED]") {
					t.Fatalf("got %s, want the echoed credential redacted", whole)
				}
				if res.OK {
					var v any
					if err := json.Unmarshal(res.Value, &v); err != nil {
						t.Fatalf("the value %s is not JSON: %v", res.Value, err)
					}
					if _, isString := v.(string); mode != "url-encoded" && isString {
						t.Errorf("got the JSON body back as a string %s, want it kept JSON", res.Value)
					}
				} else if res.Error.Kind != "ToolFailure" || !strings.HasPrefix(res.Error.Message, "HTTP ") {
					t.Errorf("got error %s: %s, want a ToolFailure with the HTTP status", res.Error.Kind, res.Error.Message)
				}
			})
		}
	}
}

// TestStaticBasicHeaderRedacted: a Basic header the host put among
// Options.Headers is redacted decoded too.
func TestStaticBasicHeaderRedacted(t *testing.T) {
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "user %s pass %s", url.QueryEscape(user), base64.RawURLEncoding.EncodeToString([]byte(pass)))
	})
	api := convert(t, strings.Replace(clientSpec, "security: [{key: []}, {bearer: []}]", "", 1), Options{
		BaseURL: srv.URL,
		Headers: http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("static-user:static/pass+word"))}},
	})
	got, err := call(t, api, "getThing", `{"id": 1}`)
	if want := "user [REDACTED] pass [REDACTED]"; err != nil || got != want {
		t.Fatalf("got %v (%v), want %q", got, err, want)
	}
}
