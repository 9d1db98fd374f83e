package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// OAuthConfig is a URL server's "oauth" object:
//
//	"github": {"url": "https://api.githubcopilot.com/mcp/",
//	  "oauth": {"clientId": "Iv1.0123", "clientSecret": "${GITHUB_OAUTH_SECRET}", "scopes": ["repo"]}}
//
// Every field is optional. clientId and clientSecret take ${NAME}
// references like the other fields; the secret is redacted like a
// header's value.
type OAuthConfig struct {
	// ClientID and ClientSecret are a client registered with the
	// authorization server ahead of time, for servers that offer no
	// dynamic client registration (GitHub's, for one). Without ClientID,
	// codemode registers itself (RFC 7591) as a public client. Without
	// ClientSecret, the client is public: PKCE alone protects the code.
	ClientID     string `json:"clientId,omitempty"`
	ClientSecret string `json:"clientSecret,omitempty"`

	// Scopes are requested on top of the ones the server asks for (its
	// WWW-Authenticate challenge, or else its scopes_supported).
	Scopes []string `json:"scopes,omitempty"`

	// CallbackPort fixes the port of the loopback redirect URI,
	// http://127.0.0.1:PORT/callback, for a pre-registered client whose
	// authorization server compares the port too. Zero means a random
	// free port, as RFC 8252 intends for native applications.
	CallbackPort int `json:"callbackPort,omitempty"`
}

// UnmarshalJSON refuses fields it does not know: a misspelt "clientID"
// would otherwise be dropped silently, and the login would register a new
// client instead of using the configured one.
func (o *OAuthConfig) UnmarshalJSON(data []byte) error {
	// Keys are matched exactly, as parseServer does: encoding/json alone
	// would take "clientID" for "clientId".
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return err
	}
	for k := range keys {
		switch k {
		case "clientId", "clientSecret", "scopes", "callbackPort":
		default:
			return fmt.Errorf("unknown field %q", k)
		}
	}
	type plain OAuthConfig
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*o = OAuthConfig(p)
	return nil
}

// check validates the object (nil is valid).
func (o *OAuthConfig) check() error {
	if o == nil {
		return nil
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		return errors.New("oauth.clientSecret needs oauth.clientId")
	}
	if o.CallbackPort < 0 || o.CallbackPort > 65535 {
		return fmt.Errorf("oauth.callbackPort %d is not a port", o.CallbackPort)
	}
	for _, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
			return fmt.Errorf("oauth.scopes entry %q is not a scope", s)
		}
	}
	return nil
}

// usesOAuth reports whether a URL server may be authorized with OAuth: it
// is one (not a command), and no Authorization header is configured,
// which would replace the OAuth token on every request.
func (sc UpstreamConfig) usesOAuth() bool {
	if sc.transport() == TypeStdio || sc.URL == "" {
		return false
	}
	for k := range sc.Headers {
		if strings.EqualFold(k, "Authorization") {
			return false
		}
	}
	return true
}
