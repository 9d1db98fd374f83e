package mcp

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/codemode-go/codemode/internal/redact"
)

// expand substitutes the host's environment into the entry's command,
// args, env values, cwd, url and header values, as ParseConfig documents,
// and keeps the substituted values of credential-named variables as
// secrets. The error names the field and the variable, never a value.
// The warnings (without their Server) are for values that are a bare
// "$NAME", which some clients expand and this package passes as written.
func (sc *UpstreamConfig) expand(lookup func(string) (string, bool)) (warnings []ConfigWarning, err error) {
	x := expander{lookup: lookup}
	// Kept on failure too: the values expanded before it are in the entry.
	defer func() { sc.expanded = x.secrets }()
	one := func(field string, s *string) error {
		if len(*s) > 1 && (*s)[0] == '$' && isVariableName((*s)[1:]) {
			warnings = append(warnings, ConfigWarning{Field: field, Reason: fmt.Sprintf(
				"its value %q is passed as written: only ${NAME} is expanded, so write ${%s} for the variable", *s, (*s)[1:])})
		}
		v, err := x.expand(*s)
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		*s = v
		return nil
	}
	if err := one("command", &sc.Command); err != nil {
		return nil, err
	}
	if sc.Args != nil {
		sc.Args = append([]string(nil), sc.Args...)
	}
	for i := range sc.Args {
		if err := one(fmt.Sprintf("args[%d]", i), &sc.Args[i]); err != nil {
			return nil, err
		}
	}
	if err := one("cwd", &sc.Cwd); err != nil {
		return nil, err
	}
	if err := one("url", &sc.URL); err != nil {
		return nil, err
	}
	if sc.OAuth != nil {
		o := *sc.OAuth // a copy: the caller's stays as written
		if err := one("oauth.clientId", &o.ClientID); err != nil {
			return nil, err
		}
		if err := one("oauth.clientSecret", &o.ClientSecret); err != nil {
			return nil, err
		}
		sc.OAuth = &o
	}
	for _, m := range []struct {
		field string
		vals  *map[string]string
	}{{"env", &sc.Env}, {"headers", &sc.Headers}} {
		if *m.vals == nil {
			continue
		}
		out := make(map[string]string, len(*m.vals))
		keys := make([]string, 0, len(*m.vals))
		for k := range *m.vals {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the first problem reported is the same every time
		for _, k := range keys {
			v := (*m.vals)[k]
			if err := one(m.field+"."+k, &v); err != nil {
				return nil, err
			}
			out[k] = v
		}
		*m.vals = out
	}
	return warnings, nil
}

// expander resolves ${…} references.
type expander struct {
	lookup  func(string) (string, bool)
	secrets []string // values of credential-named variables substituted
}

// expand substitutes every reference in s. A "${" without a closing brace
// is not a reference and stays as written.
func (x *expander) expand(s string) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i+2:], '}')
		if j < 0 {
			break
		}
		b.WriteString(s[:i])
		v, err := x.resolve(s[i+2 : i+2+j])
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		s = s[i+2+j+1:]
	}
	b.WriteString(s)
	return b.String(), nil
}

// resolve is the value of one reference, the text between "${" and "}".
func (x *expander) resolve(ref string) (string, error) {
	switch {
	case ref == "userHome":
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("${userHome}: %v", err)
		}
		return home, nil
	case ref == "pathSeparator" || ref == "/":
		return string(os.PathSeparator), nil
	case strings.HasPrefix(ref, "input:"):
		return "", fmt.Errorf("${%s} is a VS Code prompt, which codemode cannot show: put the value in an environment variable and write ${env:NAME}", ref)
	case strings.HasPrefix(ref, "workspaceFolder") || ref == "cwd" || strings.HasPrefix(ref, "command:") || strings.HasPrefix(ref, "config:"):
		return "", fmt.Errorf("${%s} has a value only inside VS Code: write the path or value itself", ref)
	}
	name, def, hasDefault := strings.Cut(ref, ":-")
	name = strings.TrimPrefix(name, "env:")
	if !isVariableName(name) {
		return "", fmt.Errorf("${%s} is not a reference codemode knows: write ${NAME} or ${env:NAME} for an environment variable", ref)
	}
	v, ok := x.lookup(name)
	if hasDefault && v == "" {
		return def, nil
	}
	if !ok {
		return "", fmt.Errorf("the environment variable %s is not set", name)
	}
	if v != "" && redact.SensitiveName(name) {
		x.secrets = append(x.secrets, v)
	}
	return v, nil
}

// isVariableName reports whether s is a portable environment variable
// name: a letter or underscore, then letters, digits and underscores.
func isVariableName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}
