package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cmd/codemode/internal/demo"
	"github.com/codemode-go/codemode/openapi"
)

// sourceFlags are the flags that give a command its tools. Credentials
// are read from environment variables named by flags, never from the
// flags themselves, so they stay out of shell history and process lists.
type sourceFlags struct {
	demoTools bool
	openapis  multiFlag // PATH[=namespace]
	baseURL   string
	bearerEnv string
	basicEnv  string
	apikeyEnv multiFlag // SCHEME=NAME
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func (s *sourceFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&s.demoTools, "demo-tools", false, "give programs the built-in demo tools (in memory)")
	fs.Var(&s.openapis, "openapi", "an OpenAPI 3 document (JSON or YAML) as tools: PATH or PATH=namespace (repeatable; the namespace defaults to one derived from the title)")
	fs.StringVar(&s.baseURL, "base-url", "", "base URL for the --openapi APIs, overriding their servers")
	fs.StringVar(&s.bearerEnv, "bearer-env", "", "environment variable holding the bearer token for the APIs' bearer and OAuth schemes")
	fs.StringVar(&s.basicEnv, "basic-env", "", "environment variable holding user:password for the APIs' basic-auth schemes")
	fs.Var(&s.apikeyEnv, "apikey-env", "SCHEME=NAME: environment variable NAME holds the API key of security scheme SCHEME (repeatable)")
}

// tools builds the tool tree; warnings (skipped operations) go to warn.
func (s *sourceFlags) tools(warn func(format string, args ...any)) (codemode.Tools, error) {
	tools := codemode.Tools{}
	if s.demoTools {
		tools = demo.Tools()
	}
	creds, err := s.credentials()
	if err != nil {
		return nil, err
	}
	for _, arg := range s.openapis {
		path, ns, _ := strings.Cut(arg, "=")
		spec, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--openapi: %w", err)
		}
		api, err := openapi.FromSpec(spec, openapi.Options{BaseURL: s.baseURL, Credentials: creds})
		if err != nil {
			return nil, fmt.Errorf("--openapi %s: %w", path, err)
		}
		if ns == "" {
			ns = api.Namespace
		}
		if err := codemode.CheckName(ns); err != nil || ns == codemode.SearchNamespace {
			return nil, fmt.Errorf("--openapi %s: %q is not a usable namespace; give one with PATH=namespace", path, ns)
		}
		if tools, err = codemode.Merge(tools, codemode.Tools{ns: api.Tools}); err != nil {
			return nil, fmt.Errorf("--openapi %s: %w; give another namespace with PATH=namespace", path, err)
		}
		for _, sk := range api.Skipped {
			warn("%s: skipped %s: %s", path, sk.Operation, sk.Reason)
		}
	}
	return tools, nil
}

// credentials maps the credential flags to a CredentialFunc, checking
// every named variable is set.
func (s *sourceFlags) credentials() (openapi.CredentialFunc, error) {
	get := func(flagName, env string) (string, error) {
		v, ok := os.LookupEnv(env)
		if !ok || v == "" {
			return "", fmt.Errorf("--%s: environment variable %s is not set", flagName, env)
		}
		return v, nil
	}
	var bearer, user, pass string
	var err error
	if s.bearerEnv != "" {
		if bearer, err = get("bearer-env", s.bearerEnv); err != nil {
			return nil, err
		}
	}
	if s.basicEnv != "" {
		v, err := get("basic-env", s.basicEnv)
		if err != nil {
			return nil, err
		}
		var ok bool
		if user, pass, ok = strings.Cut(v, ":"); !ok {
			return nil, fmt.Errorf("--basic-env: %s must hold user:password", s.basicEnv)
		}
	}
	keys := map[string]string{}
	for _, kv := range s.apikeyEnv {
		scheme, env, ok := strings.Cut(kv, "=")
		if !ok || scheme == "" || env == "" {
			return nil, fmt.Errorf("--apikey-env %q: want SCHEME=NAME", kv)
		}
		if keys[scheme], err = get("apikey-env", env); err != nil {
			return nil, err
		}
	}
	if bearer == "" && user == "" && len(keys) == 0 {
		return nil, nil
	}
	return func(_ context.Context, req openapi.CredentialRequest) (openapi.Credential, error) {
		switch req.Type {
		case "bearer":
			if bearer != "" {
				return openapi.Credential{Token: bearer}, nil
			}
		case "basic":
			if user != "" {
				return openapi.Credential{Username: user, Password: pass}, nil
			}
		case "apiKey":
			if k, ok := keys[req.Scheme]; ok {
				return openapi.Credential{Key: k}, nil
			}
		}
		return openapi.Credential{}, openapi.ErrNoCredential
	}, nil
}
