package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/pattern"
	"github.com/codemode-go/codemode/internal/redact"
)

// Config is the file format MCP clients share:
//
//	{"mcpServers": {
//	  "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
//	  "docs":  {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
//	}}
//
// Each key names a server and becomes its namespace: tools.files.read_file(…).
// VS Code's spelling, {"servers": {…}}, is accepted too. Other top-level
// keys are ignored, so a desktop client's whole settings file can be used.
// [ParseConfig] describes the fields other clients write.
type Config struct {
	Servers map[string]UpstreamConfig `json:"mcpServers"`

	// Warnings lists what ParseConfig read but ignored: fields this
	// package does not use, and settings of other clients it cannot
	// honour. A host should show them (codemode mcp logs them), since an
	// ignored field may be one the file's author relies on.
	Warnings []ConfigWarning `json:"-"`
}

// ConfigWarning is one field of a server entry that ParseConfig ignored.
type ConfigWarning struct {
	Server string // the server's name
	Field  string // the field's name
	Reason string // why it is ignored, and what to use instead
}

// String reads "server "name": field "f" is ignored: reason".
func (w ConfigWarning) String() string {
	return fmt.Sprintf("server %q: field %q is ignored: %s", w.Server, w.Field, w.Reason)
}

// UpstreamConfig describes one upstream server: a command to run (stdio) or
// a URL to connect to (streamable HTTP, falling back to the older HTTP+SSE
// transport). Its values are used as they are: ${NAME} references are
// expanded by ParseConfig, from a file, not by Connect.
type UpstreamConfig struct {
	// Type is "stdio", "http" or "sse"; empty infers it: a command means
	// stdio, a URL means streamable HTTP with a fallback to SSE for servers
	// that predate it. "streamable-http" and "streamableHttp" mean "http".
	Type string `json:"type,omitempty"`

	// Command, Args, Env and Cwd start a stdio server. The child gets a
	// minimal environment — PATH, HOME, USER, LOGNAME, SHELL, TERM, TMPDIR,
	// LANG and TZ on Unix, their counterparts on Windows — plus the
	// variables EnvInherit names, with Env merged over it: a server is
	// third-party code, so the host's other variables (API keys among
	// them) reach it only when listed. The value of a variable whose name
	// suggests a credential (it contains auth, key, token, secret, cookie,
	// session, password, passwd or credential, in any case), and the
	// password of any URL in the command, an argument, an env value or
	// cwd (postgres://user:password@host/db; the user name when there is
	// no password, as in https://<token>@host/), are redacted from
	// everything the server sends back to a program and from the log, as
	// the package documentation describes.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`

	// EnvInherit names variables of the host's environment that the
	// server inherits as they are, when they are set: ["GITHUB_TOKEN"].
	// A name that is not set is left out silently; write
	// "env": {"NAME": "${NAME}"} in a config file to require it. Every
	// inherited value is redacted like a credential, whatever its name
	// (except those of the minimal environment above, which every server
	// gets anyway): a setting that should show in output belongs in Env.
	EnvInherit []string `json:"envInherit,omitempty"`

	// URL and Headers reach an HTTP server. Headers (authorization, API
	// keys) are sent with every request to the URL's origin (scheme, host
	// and port) and to no other; a redirect to another origin is refused
	// (the error names it, so the URL can be updated). Header values (and
	// the password of a URL inside one), and the URL's user, password and
	// query parameters whose names suggest a credential, are redacted like
	// Env's credentials.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// OAuth configures how codemode authorizes itself to a URL server
	// that asks for OAuth (it answers 401 with a WWW-Authenticate
	// challenge), as the MCP authorization specification describes. It
	// is optional: without it, codemode registers itself with the
	// authorization server (dynamic client registration) when the server
	// offers that. A URL server that has no Authorization header
	// configured may use OAuth; the token comes from "codemode login
	// NAME", which stores it (see [Login]).
	OAuth *OAuthConfig `json:"oauth,omitempty"`

	// Allow, when not empty, keeps only the tools whose names match one of
	// its patterns; Deny then drops the tools that match one of its. A
	// pattern is a tool name, where "*" matches any run of characters and
	// "?" any single character (there is no escaping: a tool name holding
	// those characters is matched by the pattern itself).
	Allow []string `json:"allowTools,omitempty"`
	Deny  []string `json:"denyTools,omitempty"`

	// Disabled leaves the server out, as desktop clients do.
	Disabled bool `json:"disabled,omitempty"`

	// problem is why the entry cannot be used though the file is valid:
	// a variable it refers to is not set. Connect reports the server as
	// failed without starting it.
	problem error
	// expanded are the values ParseConfig substituted from variables whose
	// names suggest a credential, wherever they went (an argument, a
	// header, a URL): secrets like the configured ones.
	expanded []string
}

// Transport types a UpstreamConfig can name.
const (
	TypeStdio = "stdio"
	TypeHTTP  = "http"
	TypeSSE   = "sse"
)

// ErrInvalidConfig wraps every error LoadConfig and ParseConfig return
// for a file that is not a usable configuration (as opposed to one that
// could not be read).
var ErrInvalidConfig = errors.New("mcp: invalid config")

// LoadConfig reads and checks a config file, as [ParseConfig] does. Errors
// name the file, the server and the field at fault.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcp: reading config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes and checks a config as MCP clients write it — Claude
// Desktop, Claude Code, Cursor, Windsurf, Cline, Roo Code, Gemini CLI and
// VS Code among them — so their files can be used as they are:
//
//   - The servers are under "mcpServers" or, as VS Code writes, "servers".
//   - A server with "disabled": true or "enabled": false is left out.
//   - "serverUrl" (Windsurf) is "url"; "httpUrl" (Gemini CLI) is a "url"
//     of type "http"; "transportType" (older Cline) is "type".
//   - "includeTools" (Gemini CLI) adds to "allowTools"; "excludeTools"
//     (Gemini CLI) and "disabledTools" (Roo Code, Windsurf) add to
//     "denyTools", so a tool an author switched off stays off.
//   - Any other field (autoApprove, alwaysAllow, timeout, envFile, a typo)
//     is ignored and listed in Config.Warnings, naming the server and the
//     field; it is not an error, since other clients add fields of their
//     own. A typo still surfaces when it leaves the entry without a
//     command or a url.
//
// Values may refer to the host's environment, in command, args, env
// values, cwd, url and header values: ${NAME} and ${env:NAME} are the
// variable's value, ${NAME:-default} is default when NAME is unset or
// empty, ${userHome} is the home directory and ${pathSeparator} (or ${/})
// the path separator. A value substituted from a variable whose name
// suggests a credential (see UpstreamConfig.Env) is redacted wherever it
// ends up, an argument or a URL included. A variable that is not set
// does not make the file invalid, only its server unusable: the server is
// kept, and [Connect] reports it as failed, naming the field and the
// variable, without starting it (the environment will not change while
// the process runs). VS Code's ${input:…} prompts and ${workspaceFolder}
// have no value outside VS Code and are reported the same way. Only
// ${…} is expanded; a "$" elsewhere is kept as written.
//
// Errors wrap [ErrInvalidConfig] and name the server and the field.
func ParseConfig(data []byte) (*Config, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, bad("not a JSON object: %s", jsonProblem(data, err))
	}
	key := "mcpServers"
	raw, ok := top[key]
	if alt, ok2 := top["servers"]; ok2 {
		if ok {
			return nil, bad(`both "mcpServers" and "servers" are present; keep one`)
		}
		key, raw, ok = "servers", alt, true
	}
	if !ok {
		return nil, bad(`no "mcpServers" object`)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil || entries == nil {
		return nil, bad("%q must be an object mapping names to servers", key)
	}
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	cfg := &Config{Servers: map[string]UpstreamConfig{}}
	for _, name := range names {
		sc, skip, warnings, err := parseServer(name, entries[name])
		if err != nil {
			return nil, bad("server %q: %v", name, err)
		}
		if skip {
			continue
		}
		if err := checkServerName(name); err != nil {
			return nil, bad("%v", err)
		}
		cfg.Warnings = append(cfg.Warnings, warnings...)
		cfg.Servers[name] = sc
	}
	return cfg, nil
}

// ignoredFields are other clients' per-server settings that have no
// effect here, with what a warning says about each.
var ignoredFields = map[string]string{
	"autoApprove": "there is no approval step: a program may call every tool the server lists (limit them with allowTools or denyTools)",
	"alwaysAllow": "there is no approval step: a program may call every tool the server lists (limit them with allowTools or denyTools)",
	"trust":       "there is no approval step: a program may call every tool the server lists (limit them with allowTools or denyTools)",
	"timeout":     "clients count it in different units; starting a server is bounded by the client's connect timeout and each call by its call timeout (codemode mcp --connect-timeout, --call-timeout)",
	"envFile":     `env files are not read; list the variables under "env", with values such as "${NAME}" taken from codemode's environment, or name them in "envInherit"`,
	"description": "a label for people; it is not shown to the model",
}

// parseServer decodes one server entry, resolving the other clients'
// spellings and expanding variables. skip reports a disabled entry (which
// may be half-written, so it is not checked). A variable that is not set
// is recorded in the entry's problem, not returned as an error.
func parseServer(name string, raw json.RawMessage) (sc UpstreamConfig, skip bool, warnings []ConfigWarning, err error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return sc, false, nil, errors.New("must be an object with a command or a url")
	}
	var alias struct {
		serverURL, httpURL, transportType string
		include, exclude, disabledTools   []string
		enabled                           *bool
	}
	// Keys are matched exactly, unlike encoding/json's struct decoding,
	// which would take "Command" for "command" and then warn about it.
	fields := map[string]any{
		"type": &sc.Type, "command": &sc.Command, "args": &sc.Args, "env": &sc.Env, "envInherit": &sc.EnvInherit,
		"cwd": &sc.Cwd, "url": &sc.URL, "headers": &sc.Headers, "oauth": &sc.OAuth, "allowTools": &sc.Allow, "denyTools": &sc.Deny,
		"disabled": &sc.Disabled, "enabled": &alias.enabled,
		"serverUrl": &alias.serverURL, "httpUrl": &alias.httpURL, "transportType": &alias.transportType,
		"includeTools": &alias.include, "excludeTools": &alias.exclude, "disabledTools": &alias.disabledTools,
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		dst, known := fields[k]
		if !known {
			reason, ok := ignoredFields[k]
			if !ok {
				reason = "codemode does not know it (it reads type, command, args, env, envInherit, cwd, url, headers, oauth, allowTools, denyTools and disabled)"
			}
			warnings = append(warnings, ConfigWarning{Server: name, Field: k, Reason: reason})
			continue
		}
		if string(keys[k]) == "null" {
			continue // as if absent, as encoding/json treats it
		}
		if err := json.Unmarshal(keys[k], dst); err != nil {
			return sc, false, nil, fmt.Errorf("field %q must be %s", k, jsonKind(dst))
		}
	}
	if sc.Disabled || alias.enabled != nil && !*alias.enabled {
		return sc, true, nil, nil // a disabled entry may be half-written
	}
	for _, a := range []struct{ field, value string }{{"serverUrl", alias.serverURL}, {"httpUrl", alias.httpURL}} {
		if a.value == "" {
			continue
		}
		if sc.URL != "" {
			return sc, false, nil, fmt.Errorf(`has both "url" and %q; keep one`, a.field)
		}
		sc.URL = a.value
		if a.field == "httpUrl" && sc.Type == "" {
			sc.Type = TypeHTTP
		}
	}
	if alias.transportType != "" {
		if sc.Type != "" && sc.Type != alias.transportType {
			return sc, false, nil, fmt.Errorf(`has "type" %q and "transportType" %q; keep one`, sc.Type, alias.transportType)
		}
		sc.Type = alias.transportType
	}
	sc.Allow = append(sc.Allow, alias.include...)
	sc.Deny = append(append(sc.Deny, alias.exclude...), alias.disabledTools...)
	notes, err := sc.expand(os.LookupEnv)
	for _, w := range notes {
		w.Server = name
		warnings = append(warnings, w)
	}
	if err != nil {
		sc.problem = err
		return sc, false, warnings, nil
	}
	return sc, false, warnings, sc.check()
}

// jsonKind names the JSON a field's Go type takes, for errors.
func jsonKind(dst any) string {
	switch dst.(type) {
	case *string:
		return "a string"
	case *[]string:
		return "an array of strings"
	case *map[string]string:
		return "an object of strings"
	case *bool, **bool:
		return "true or false"
	case **OAuthConfig:
		return `an object such as {"clientId": "...", "clientSecret": "${SECRET}", "scopes": ["read"]}`
	}
	return "something else"
}

// check validates one server entry and normalizes its Type.
func (sc *UpstreamConfig) check() error {
	switch sc.Type {
	case "streamable-http", "streamableHttp", "streamable_http":
		sc.Type = TypeHTTP
	case "", TypeStdio, TypeHTTP, TypeSSE:
	default:
		return fmt.Errorf("type %q is not stdio, http or sse", sc.Type)
	}
	hasCmd, hasURL := strings.TrimSpace(sc.Command) != "", strings.TrimSpace(sc.URL) != ""
	switch {
	case hasCmd && hasURL:
		return errors.New("has both a command and a url; a server is one or the other")
	case !hasCmd && !hasURL:
		return errors.New("needs a command (stdio) or a url (HTTP)")
	case hasCmd && (sc.Type == TypeHTTP || sc.Type == TypeSSE):
		return fmt.Errorf("type %q needs a url, not a command", sc.Type)
	case hasURL && sc.Type == TypeStdio:
		return errors.New(`type "stdio" needs a command, not a url`)
	}
	if hasCmd {
		if len(sc.Headers) > 0 {
			return errors.New("headers apply only to a url")
		}
		if sc.OAuth != nil {
			return errors.New("oauth applies only to a url")
		}
	} else {
		if len(sc.Args) > 0 || len(sc.Env) > 0 || len(sc.EnvInherit) > 0 || sc.Cwd != "" {
			return errors.New("args, env, envInherit and cwd apply only to a command")
		}
		if !strings.HasPrefix(sc.URL, "http://") && !strings.HasPrefix(sc.URL, "https://") {
			// The error is shown and logged: the URL's credentials stay out.
			return fmt.Errorf("url %q must start with http:// or https://", redact.New(sc.secrets()...).String(sc.URL))
		}
	}
	for k := range sc.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env name %q is not a variable name", k)
		}
	}
	for _, k := range sc.EnvInherit {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("envInherit name %q is not a variable name", k)
		}
	}
	for k, v := range sc.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n\x00") || strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("header %q is not a valid header", k)
		}
	}
	if err := sc.OAuth.check(); err != nil {
		return err
	}
	for _, p := range append(append([]string(nil), sc.Allow...), sc.Deny...) {
		if p == "" {
			return errors.New("allowTools and denyTools entries must not be empty")
		}
	}
	if hasCmd && sc.Cwd != "" && !filepath.IsAbs(sc.Cwd) {
		// Relative to what? The process's directory and the file's differ;
		// refusing is clearer than guessing.
		return fmt.Errorf("cwd %q must be an absolute path", sc.Cwd)
	}
	return nil
}

// secrets lists what the entry holds that must not reach a program or
// the log: its header values (with the credentials inside "Bearer x" and
// "Basic x"), the values of its environment variables whose names suggest
// a credential, the value of every variable it inherits, the values
// ParseConfig substituted from credential-named variables, the password
// (or token-as-user) of every URL in its command, args, env values, cwd,
// url and header values (redact.URLSecrets), and its url's user and
// credential-named query parameters (hosted servers often take the key in
// the URL).
func (sc UpstreamConfig) secrets() []string {
	var out []string
	texts := []string{sc.Command, sc.Cwd, sc.URL}
	texts = append(texts, sc.Args...)
	for _, v := range sc.Headers {
		out = append(out, redact.HeaderSecrets(v)...)
		texts = append(texts, v)
	}
	for k, v := range sc.Env {
		if redact.SensitiveName(k) {
			out = append(out, v)
		}
		texts = append(texts, v)
	}
	// EnvInherit is how a host passes its own credentials to a server
	// without writing them in the file, and their names need not say so
	// (DATABASE_URL, GH_PAT): every inherited value is a secret. The
	// variables every server inherits anyway (PATH, HOME, ...) are not,
	// whether listed or not: they hold paths and names that ordinary
	// output is full of.
	base := inheritedEnv()
	for _, k := range sc.EnvInherit {
		if v := os.Getenv(k); v != "" && !contains(base, k) {
			out = append(out, v)
			texts = append(texts, v)
		}
	}
	if sc.OAuth != nil && sc.OAuth.ClientSecret != "" {
		out = append(out, sc.OAuth.ClientSecret)
	}
	out = append(out, sc.expanded...)
	for _, t := range texts {
		out = append(out, redact.URLSecrets(t)...)
	}
	if u, err := url.Parse(sc.URL); err == nil && sc.URL != "" {
		if u.User != nil {
			// The user name too, unlike in other fields: an HTTP client
			// sends the pair as Basic credentials, which an upstream may
			// echo whole.
			pass, _ := u.User.Password()
			out = append(out, u.User.Username(), pass, u.User.Username()+":"+pass)
		}
		for k, vs := range u.Query() {
			if redact.SensitiveName(k) {
				out = append(out, vs...)
			}
		}
	}
	return out
}

// transport is the resolved transport type.
func (sc UpstreamConfig) transport() string {
	switch {
	case sc.Type != "":
		return sc.Type
	case sc.Command != "":
		return TypeStdio
	}
	return TypeHTTP
}

// checkServerName keeps namespace names plain: they appear in tool paths
// ("files.read_file"), in the tool-call audit and in logs, where a dot or
// a space would be ambiguous.
func checkServerName(name string) error {
	if name == "" {
		return errors.New("a server name is empty")
	}
	if name == codemode.BuiltinNamespace {
		return fmt.Errorf("server name %q is reserved for the built-in search", name)
	}
	if err := codemode.CheckName(name); err != nil {
		return fmt.Errorf("server name: %w", err)
	}
	if len(name) > 64 {
		return fmt.Errorf("server name %q is longer than 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("server name %q may hold only letters, digits, '_' and '-'", name)
		}
	}
	return nil
}

// allowed applies the allow and deny lists to a tool name.
func (sc UpstreamConfig) allowed(tool string) bool {
	if len(sc.Allow) > 0 && !matchAny(sc.Allow, tool) {
		return false
	}
	return !matchAny(sc.Deny, tool)
}

// matchAny matches a tool's name on its server against the patterns,
// with the rules policies use: the name is one segment, '*' any run of
// characters in it (slashes and dots included), '?' one character.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if pattern.Glob(p, name) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// jsonProblem describes a JSON syntax error with its line and column.
func jsonProblem(data []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err.Error()
	}
	line, col := 1, 1
	for i := 0; i < int(se.Offset)-1 && i < len(data); i++ {
		if data[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("%v at line %d, column %d", se, line, col)
}
