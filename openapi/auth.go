package openapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/codemode-go/codemode"
)

// scheme is a security scheme the tools can satisfy.
type scheme struct {
	name string
	typ  string // "bearer", "basic" or "apiKey"
	in   string // apiKey: "header" or "query"
	key  string // apiKey: the header or query parameter name
}

// use is one scheme of a security requirement, with its scopes.
type use struct {
	scheme
	scopes []string
}

// security is an operation's security: alternatives tried in order (each
// needs all of its schemes), and whether an anonymous call is allowed.
type security struct {
	alternatives [][]use
	anonymous    bool
}

// security reads an operation's requirements (its own, else the
// document's). It fails only when no alternative is usable.
func (b *builder) security(op *v3.Operation) (security, string) {
	reqs := op.Security
	if reqs == nil {
		reqs = b.doc.Security
	}
	var sec security
	if len(reqs) == 0 {
		sec.anonymous = true
		return sec, ""
	}
	var unsupported []string
	for _, r := range reqs {
		if r == nil || r.Requirements == nil || r.Requirements.Len() == 0 {
			sec.anonymous = true
			continue
		}
		var alt []use
		ok := true
		for name, scopes := range r.Requirements.FromOldest() {
			s, why := b.scheme(name)
			if why != "" {
				if !slices.Contains(unsupported, why) {
					unsupported = append(unsupported, why)
				}
				ok = false
				break
			}
			alt = append(alt, use{scheme: s, scopes: scopes})
		}
		if ok {
			sec.alternatives = append(sec.alternatives, alt)
		}
	}
	if len(sec.alternatives) == 0 && !sec.anonymous {
		return sec, "no supported security scheme: " + strings.Join(unsupported, "; ")
	}
	return sec, ""
}

// scheme maps a named security scheme to what the tools support, or says
// why it is not supported. oauth2 and openIdConnect are bearer tokens the
// host obtains: the tools never run a flow.
func (b *builder) scheme(name string) (scheme, string) {
	s := b.schemes[name]
	if s == nil {
		return scheme{}, fmt.Sprintf("%s is not defined", name)
	}
	out := scheme{name: name}
	switch strings.ToLower(s.Type) {
	case "http":
		switch strings.ToLower(s.Scheme) {
		case "bearer":
			out.typ = "bearer"
		case "basic":
			out.typ = "basic"
		default:
			return out, fmt.Sprintf("%s (http %s)", name, s.Scheme)
		}
	case "oauth2", "openidconnect":
		out.typ = "bearer"
	case "apikey":
		if s.Name == "" {
			return out, fmt.Sprintf("%s (apiKey without a name)", name)
		}
		switch strings.ToLower(s.In) {
		case "header", "query":
			out.typ, out.in, out.key = "apiKey", strings.ToLower(s.In), s.Name
		default:
			return out, fmt.Sprintf("%s (apiKey in %s)", name, s.In)
		}
	default:
		return out, fmt.Sprintf("%s (%s)", name, s.Type)
	}
	return out, ""
}

// applied is what a call's credentials did to its request, for redirects
// and redaction.
type applied struct {
	headers []string // header names that carry a credential
	query   []string // query parameter names that carry a credential
	secrets []string // every secret value sent (redact.New derives the encodings)
}

// authorize picks the first alternative whose every scheme has a
// credential and applies it. Credentials are looked up at most once per
// scheme per call.
func (o *operation) authorize(ctx context.Context, req *http.Request) (*applied, error) {
	a := &applied{}
	if len(o.security.alternatives) == 0 {
		return a, nil // anonymous only
	}
	cache := map[string]*Credential{}
	lookup := func(u use) (*Credential, error) {
		if c, ok := cache[u.name]; ok {
			return c, nil
		}
		var c *Credential
		if o.c.opts.Credentials != nil {
			cred, err := o.c.opts.Credentials(ctx, CredentialRequest{
				Scheme: u.name, Type: u.typ, In: u.in, Name: u.key,
				Scopes: slices.Clone(u.scopes), Operation: o.id,
			})
			switch {
			case errors.Is(err, ErrNoCredential):
			case err != nil:
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				// The host's error may hold anything; the program only
				// learns that the lookup failed.
				return nil, fmt.Errorf("%w: %w", codemode.ToolErrorf("credential lookup failed for security scheme %q", u.name), err)
			case usable(u.typ, cred):
				c = &cred
			}
		}
		cache[u.name] = c
		return c, nil
	}
	for _, alt := range o.security.alternatives {
		creds := make([]*Credential, len(alt))
		complete := true
		for i, u := range alt {
			c, err := lookup(u)
			if err != nil {
				return nil, err
			}
			if c == nil {
				complete = false
				break
			}
			creds[i] = c
		}
		if complete {
			for i, u := range alt {
				a.apply(req, u.scheme, *creds[i])
			}
			return a, nil
		}
	}
	if o.security.anonymous {
		return a, nil
	}
	names := []string{}
	for _, alt := range o.security.alternatives {
		for _, u := range alt {
			if !slices.Contains(names, u.name) {
				names = append(names, u.name)
			}
		}
	}
	return nil, codemode.ToolErrorf("no credentials available for %s (security schemes: %s); the host has to provide them", o.id, strings.Join(names, ", "))
}

// usable reports whether c holds what a scheme of type typ needs.
func usable(typ string, c Credential) bool {
	switch typ {
	case "basic":
		return c.Username != "" || c.Password != ""
	default:
		return c.Token != "" || c.Key != ""
	}
}

func (a *applied) apply(req *http.Request, s scheme, c Credential) {
	switch s.typ {
	case "bearer":
		tok := c.Token
		if tok == "" {
			tok = c.Key
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		a.headers = append(a.headers, "Authorization")
		a.secrets = append(a.secrets, tok)
	case "basic":
		req.SetBasicAuth(c.Username, c.Password)
		a.headers = append(a.headers, "Authorization")
		// The username is a secret too: Stripe-style APIs send the key as
		// the username with an empty password. The pair is what is sent
		// (base64 in the header); an upstream may echo any of the three.
		a.secrets = append(a.secrets, c.Username, c.Password, c.Username+":"+c.Password)
	case "apiKey":
		key := c.Key
		if key == "" {
			key = c.Token
		}
		a.secrets = append(a.secrets, key)
		if s.in == "header" {
			req.Header.Set(s.key, key)
			a.headers = append(a.headers, s.key)
			return
		}
		req.URL.RawQuery = setQuery(req.URL.RawQuery, s.key, key)
		a.query = append(a.query, s.key)
	}
}
