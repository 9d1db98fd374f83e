package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/redact"
)

// Config is the file format MCP clients share:
//
//	{"mcpServers": {
//	  "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
//	  "docs":  {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer …"}}
//	}}
//
// Each key names a server and becomes its namespace: tools.files.read_file(…).
// VS Code's spelling, {"servers": {…}}, is accepted too. Other top-level
// keys are ignored, so a desktop client's whole settings file can be used.
type Config struct {
	Servers map[string]UpstreamConfig `json:"mcpServers"`
}

// UpstreamConfig describes one upstream server: a command to run (stdio) or
// a URL to connect to (streamable HTTP, falling back to the older HTTP+SSE
// transport).
type UpstreamConfig struct {
	// Type is "stdio", "http" or "sse"; empty infers it: a command means
	// stdio, a URL means streamable HTTP with a fallback to SSE for servers
	// that predate it. "streamable-http" and "streamableHttp" mean "http".
	Type string `json:"type,omitempty"`

	// Command, Args, Env and Cwd start a stdio server. The child gets a
	// minimal environment — PATH, HOME, USER, LOGNAME, SHELL, TERM, TMPDIR,
	// LANG and TZ on Unix, their counterparts on Windows — with Env merged
	// over it: a server is third-party code, so the host's other
	// variables (API keys among them) reach it only when listed here.
	// Values are literal; nothing is expanded. The value of a variable
	// whose name suggests a credential (it contains auth, key, token,
	// secret, cookie, session, password, passwd or credential, in any
	// case) is redacted from everything the server sends back to a
	// program and from the log, as the package documentation describes.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`

	// URL and Headers reach an HTTP server. Headers (authorization, API
	// keys) are sent with every request to the URL's origin (scheme, host
	// and port) and to no other; a redirect to another origin is refused
	// (the error names it, so the URL can be updated). Header values, and
	// the URL's password and query parameters whose names suggest a
	// credential, are redacted like Env's credentials.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// Allow, when not empty, keeps only the tools whose names match one of
	// its patterns; Deny then drops the tools that match one of its. A
	// pattern is a tool name, where "*" matches any run of characters and
	// "?" any single character (there is no escaping: a tool name holding
	// those characters is matched by the pattern itself).
	Allow []string `json:"allowTools,omitempty"`
	Deny  []string `json:"denyTools,omitempty"`

	// Disabled leaves the server out, as desktop clients do.
	Disabled bool `json:"disabled,omitempty"`
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

// LoadConfig reads and checks a config file. Errors name the file, the
// server and the field at fault.
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

// serverFields are the keys a server entry may hold; anything else is a
// typo worth reporting rather than a setting silently ignored.
var serverFields = []string{"type", "command", "args", "env", "cwd", "url", "headers", "allowTools", "denyTools", "disabled"}

// ParseConfig decodes and checks a config. Disabled servers are dropped.
func ParseConfig(data []byte) (*Config, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, bad("not a JSON object: %s", jsonProblem(data, err))
	}
	raw, ok := top["mcpServers"]
	if alt, ok2 := top["servers"]; ok2 {
		if ok {
			return nil, bad(`both "mcpServers" and "servers" are present; keep one`)
		}
		raw, ok = alt, true
	}
	if !ok {
		return nil, bad(`no "mcpServers" object`)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil || entries == nil {
		return nil, bad(`"mcpServers" must be an object mapping names to servers`)
	}
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	sort.Strings(names)
	cfg := &Config{Servers: map[string]UpstreamConfig{}}
	for _, name := range names {
		if err := checkServerName(name); err != nil {
			return nil, bad("%v", err)
		}
		sc, err := parseServer(entries[name])
		if err != nil {
			return nil, bad("server %q: %v", name, err)
		}
		if sc.Disabled {
			continue
		}
		cfg.Servers[name] = sc
	}
	return cfg, nil
}

func parseServer(raw json.RawMessage) (UpstreamConfig, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil || keys == nil {
		return UpstreamConfig{}, errors.New("must be an object with a command or a url")
	}
	for k := range keys {
		if !contains(serverFields, k) {
			return UpstreamConfig{}, fmt.Errorf("unknown field %q (known: %s)", k, strings.Join(serverFields, ", "))
		}
	}
	var sc UpstreamConfig
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&sc); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return UpstreamConfig{}, fmt.Errorf("field %q must be %s", te.Field, jsonKind(te.Type.Kind().String()))
		}
		return UpstreamConfig{}, err
	}
	if sc.Disabled {
		return sc, nil // a disabled entry may be half-written
	}
	return sc, sc.check()
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice":
		return "an array of strings"
	case "map":
		return "an object of strings"
	case "bool":
		return "true or false"
	}
	return "a " + goKind
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
	} else {
		if len(sc.Args) > 0 || len(sc.Env) > 0 || sc.Cwd != "" {
			return errors.New("args, env and cwd apply only to a command")
		}
		if !strings.HasPrefix(sc.URL, "http://") && !strings.HasPrefix(sc.URL, "https://") {
			return fmt.Errorf("url %q must start with http:// or https://", sc.URL)
		}
	}
	for k := range sc.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env name %q is not a variable name", k)
		}
	}
	for k, v := range sc.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n\x00") || strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("header %q is not a valid header", k)
		}
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
// a credential, and its URL's user, password and credential-named query
// parameters (hosted servers often take the key in the URL).
func (sc UpstreamConfig) secrets() []string {
	var out []string
	for _, v := range sc.Headers {
		out = append(out, redact.HeaderSecrets(v)...)
	}
	for k, v := range sc.Env {
		if redact.SensitiveName(k) {
			out = append(out, v)
		}
	}
	if u, err := url.Parse(sc.URL); err == nil && sc.URL != "" {
		if u.User != nil {
			pass, _ := u.User.Password()
			out = append(out, u.User.Username(), pass)
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
	if name == codemode.SearchNamespace {
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

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if glob(p, name) {
			return true
		}
	}
	return false
}

// glob matches name against a pattern where '*' is any run of characters
// (slashes and dots included, unlike path.Match: MCP tool names are not
// paths) and '?' is one character.
func glob(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	pi, ni := 0, 0
	star, mark := -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
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
