package mcp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codemode-go/codemode"
)

func TestParseConfigValid(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{
		"globalShortcut": "ignored",
		"mcpServers": {
			"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"], "env": {"A": "1"}, "cwd": "/tmp"},
			"docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}, "allowTools": ["search*"], "denyTools": ["search_private"]},
			"old": {"type": "sse", "url": "http://localhost:3001/sse"},
			"typed": {"type": "streamableHttp", "url": "http://localhost:3000/mcp"},
			"off": {"disabled": true, "command": "", "url": ""}
		}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 4 {
		t.Fatalf("servers = %v (the disabled one should be dropped)", cfg.Servers)
	}
	files := cfg.Servers["files"]
	if files.Command != "npx" || len(files.Args) != 3 || files.Env["A"] != "1" || files.transport() != TypeStdio {
		t.Errorf("files = %+v", files)
	}
	if docs := cfg.Servers["docs"]; docs.transport() != TypeHTTP || docs.Headers["Authorization"] != "Bearer x" {
		t.Errorf("docs = %+v", docs)
	}
	if cfg.Servers["old"].transport() != TypeSSE || cfg.Servers["typed"].Type != TypeHTTP {
		t.Errorf("types: old %q, typed %q", cfg.Servers["old"].transport(), cfg.Servers["typed"].Type)
	}

	// VS Code's spelling.
	cfg, err = ParseConfig([]byte(`{"servers": {"a": {"type": "stdio", "command": "x"}}}`))
	if err != nil || cfg.Servers["a"].Command != "x" {
		t.Errorf("servers spelling: %v %v", cfg, err)
	}
	// No servers at all is a valid (empty) config.
	if cfg, err := ParseConfig([]byte(`{"mcpServers": {}}`)); err != nil || len(cfg.Servers) != 0 {
		t.Errorf("empty: %v %v", cfg, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"syntax", "{\n  \"mcpServers\": {,}\n}", "line 2, column 18"},
		{"not an object", `[1]`, "not a JSON object"},
		{"no servers key", `{"other": {}}`, `no "mcpServers" object`},
		{"both keys", `{"mcpServers": {}, "servers": {}}`, "keep one"},
		{"servers not an object", `{"mcpServers": []}`, "must be an object mapping names"},
		{"server not an object", `{"mcpServers": {"a": "npx"}}`, `server "a": must be an object`},
		{"command and url", `{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}`, "both a command and a url"},
		{"neither", `{"mcpServers": {"a": {"args": ["x"]}}}`, "needs a command (stdio) or a url"},
		{"unknown field", `{"mcpServers": {"a": {"comand": "x"}}}`, `unknown field "comand"`},
		{"wrong type", `{"mcpServers": {"a": {"command": "x", "args": "y"}}}`, `field "args" must be an array of strings`},
		{"bad type", `{"mcpServers": {"a": {"type": "ws", "url": "http://h"}}}`, `type "ws" is not stdio, http or sse`},
		{"type mismatch", `{"mcpServers": {"a": {"type": "sse", "command": "x"}}}`, "needs a url, not a command"},
		{"bad url", `{"mcpServers": {"a": {"url": "ftp://h"}}}`, "must start with http://"},
		{"headers on command", `{"mcpServers": {"a": {"command": "x", "headers": {"A": "b"}}}}`, "headers apply only to a url"},
		{"args on url", `{"mcpServers": {"a": {"url": "http://h", "env": {"A": "b"}}}}`, "apply only to a command"},
		{"bad header", `{"mcpServers": {"a": {"url": "http://h", "headers": {"A": "b\r\nX: y"}}}}`, "not a valid header"},
		{"relative cwd", `{"mcpServers": {"a": {"command": "x", "cwd": "sub"}}}`, "must be an absolute path"},
		{"empty pattern", `{"mcpServers": {"a": {"command": "x", "denyTools": [""]}}}`, "must not be empty"},
		{"empty name", `{"mcpServers": {"": {"command": "x"}}}`, "a server name is empty"},
		{"dotted name", `{"mcpServers": {"a.b": {"command": "x"}}}`, `"a.b" may hold only letters`},
		{"reserved name", `{"mcpServers": {"$codemode": {"command": "x"}}}`, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "servers.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"a": {"command": "x"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := LoadConfig(path); err != nil || cfg.Servers["a"].Command != "x" {
		t.Errorf("LoadConfig = %v, %v", cfg, err)
	}
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"a": {}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("error does not name the file: %v", err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.json")); err == nil || errors.Is(err, ErrInvalidConfig) {
		t.Errorf("missing file: %v", err)
	}
}

func TestAllowDeny(t *testing.T) {
	sc := UpstreamConfig{Allow: []string{"read_*", "list_directory", "get?"}, Deny: []string{"*_secret*"}}
	for name, want := range map[string]bool{
		"read_file":          true,
		"read_text_file":     true,
		"read_secret_file":   false,
		"list_directory":     true,
		"list_directory_two": false,
		"gets":               true,
		"get":                false,
		"write_file":         false,
	} {
		if got := sc.allowed(name); got != want {
			t.Errorf("allowed(%q) = %v, want %v", name, got, want)
		}
	}
	if !(UpstreamConfig{}).allowed("anything/at.all") {
		t.Error("no lists should allow everything")
	}
	if (UpstreamConfig{Deny: []string{"*"}}).allowed("x") {
		t.Error("deny * should deny everything")
	}
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"*/x", "weird/x", true},
		{"**", "", true}, {"?", "", false}, {"é?", "éa", true}, {"a.b", "a.b", true}, {"a.b", "axb", false},
	} {
		if got := glob(tc.pattern, tc.name); got != tc.want {
			t.Errorf("glob(%q, %q) = %v", tc.pattern, tc.name, got)
		}
	}
}

func TestAllowDenyFiltersListing(t *testing.T) {
	sc := kitConfig(t, nil)
	sc.Allow = []string{"echo", "weird/*", "t*"}
	sc.Deny = []string{"text"}
	up := connect(t, &Config{Servers: map[string]UpstreamConfig{"kit": sc}}, ClientOptions{})
	got := keys(up.Tools()["kit"].(codemode.Tools))
	want := map[string]bool{"echo": true, "weird/name.x": true, "then_": true}
	if len(got) != len(want) {
		t.Fatalf("tools = %v", got)
	}
	for _, k := range got {
		if !want[k] {
			t.Errorf("unexpected tool %q", k)
		}
	}
}
