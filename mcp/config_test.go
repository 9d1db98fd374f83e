package mcp

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	t.Setenv("CODEMODE_TEST_EXPANDED_URL", "ftp://h")
	for _, tc := range []struct{ name, json, want string }{
		{"syntax", "{\n  \"mcpServers\": {,}\n}", "line 2, column 18"},
		{"not an object", `[1]`, "not a JSON object"},
		{"no servers key", `{"other": {}}`, `no "mcpServers" object`},
		{"both keys", `{"mcpServers": {}, "servers": {}}`, "keep one"},
		{"servers not an object", `{"mcpServers": []}`, "must be an object mapping names"},
		{"server not an object", `{"mcpServers": {"a": "npx"}}`, `server "a": must be an object`},
		{"command and url", `{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}`, "both a command and a url"},
		{"neither", `{"mcpServers": {"a": {"args": ["x"]}}}`, "needs a command (stdio) or a url"},
		// A typo is a warning, and the entry it leaves behind an error.
		{"misspelled field", `{"mcpServers": {"a": {"comand": "x"}}}`, "needs a command (stdio) or a url"},
		{"wrong alias type", `{"mcpServers": {"a": {"command": "x", "enabled": "yes"}}}`, `field "enabled" must be true or false`},
		{"url twice", `{"mcpServers": {"a": {"url": "http://a", "serverUrl": "http://b"}}}`, `both "url" and "serverUrl"`},
		{"two types", `{"mcpServers": {"a": {"url": "http://a", "type": "http", "transportType": "sse"}}}`, "keep one"},
		{"inherit on url", `{"mcpServers": {"a": {"url": "http://a", "envInherit": ["HOME"]}}}`, "apply only to a command"},
		{"bad inherit name", `{"mcpServers": {"a": {"command": "x", "envInherit": ["A=B"]}}}`, `envInherit name "A=B"`},
		{"expanded url", `{"mcpServers": {"a": {"url": "${CODEMODE_TEST_EXPANDED_URL}"}}}`, `url "ftp://h" must start with http://`},
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
				t.Errorf("got error %q, want one containing %q", err, tc.want)
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
		if got := matchAny([]string{tc.pattern}, tc.name); got != tc.want {
			t.Errorf("matchAny(%q, %q) = %v", tc.pattern, tc.name, got)
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

// TestParseConfigClients reads a config file in the format of each MCP
// client, as its documentation describes it (the fixtures in
// testdata/clients): every enabled server is kept with its transport,
// disabled ones are left out, other clients' aliases mean what they mean
// there, and the fields this package ignores are warnings naming the
// server and the field.
func TestParseConfigClients(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory for ${userHome}")
	}
	for k, v := range map[string]string{
		"API_KEY": "k-claude-code", "API_BASE_URL": "", "CODEMODE_TEST_DIR": "/srv/mcp",
		"DOCS_API_KEY": "k-docs", "REMOTE_TOKEN": "t-remote", "GITHUB_TOKEN": "t-github", "FIGMA_TOKEN": "t-figma",
	} {
		t.Setenv(k, v)
	}
	type server struct {
		transport string
		problem   string // in the entry's problem, when it has one
	}
	for _, tc := range []struct {
		file     string
		servers  map[string]server
		warnings []string // "server.field"
		check    func(t *testing.T, cfg *Config)
	}{
		{"claude-desktop.json", map[string]server{"filesystem": {transport: TypeStdio}, "github": {transport: TypeStdio}, "sqlite": {transport: TypeStdio}}, nil,
			func(t *testing.T, cfg *Config) {
				if !slices.Contains(cfg.Servers["github"].secrets(), "ghp-fixture-not-a-real-token") {
					t.Error("got the github token missing from the secrets, want it redacted")
				}
			}},
		{"claude-code.json", map[string]server{"api": {transport: TypeHTTP}, "local": {transport: TypeStdio}, "events": {transport: TypeSSE}}, nil,
			func(t *testing.T, cfg *Config) {
				api, local := cfg.Servers["api"], cfg.Servers["local"]
				if api.URL != "https://api.example.com/mcp" || api.Headers["Authorization"] != "Bearer k-claude-code" {
					t.Errorf("got api %q %v, want the default base URL and the expanded key", api.URL, api.Headers)
				}
				if local.Command != "/srv/mcp/bin/server" || local.Args[1] != "/srv/mcp/config.json" || local.Env["CACHE_DIR"] != "/srv/mcp/cache" {
					t.Errorf("got local %q %q %v, want ${CODEMODE_TEST_DIR} expanded", local.Command, local.Args, local.Env)
				}
				if !slices.Contains(api.secrets(), "k-claude-code") {
					t.Error("got the expanded API key missing from the secrets")
				}
			}},
		{"cursor.json", map[string]server{"docs": {transport: TypeStdio}, "notes": {transport: TypeStdio}, "remote": {transport: TypeHTTP}}, []string{"docs.envFile"},
			func(t *testing.T, cfg *Config) {
				if got, want := cfg.Servers["notes"].Args[0], filepath.Join(home, "mcp", "notes.js"); got != want {
					t.Errorf("got notes arg %q, want %q", got, want)
				}
				if got := cfg.Servers["docs"].Env["DOCS_API_KEY"]; got != "k-docs" {
					t.Errorf("got DOCS_API_KEY %q, want k-docs", got)
				}
			}},
		{"vscode.json", map[string]server{
			"perplexity": {TypeStdio, "${input:perplexity-key} is a VS Code prompt"},
			"fetch":      {transport: TypeStdio},
			"github":     {transport: TypeHTTP},
			"workspace":  {TypeStdio, "${workspaceFolder} has a value only inside VS Code"},
		}, []string{"workspace.dev", "workspace.envFile"}, nil},
		{"windsurf.json", map[string]server{"github": {transport: TypeStdio}, "figma": {transport: TypeHTTP}}, nil,
			func(t *testing.T, cfg *Config) {
				gh, figma := cfg.Servers["github"], cfg.Servers["figma"]
				if gh.allowed("delete_repository") || !gh.allowed("create_issue") {
					t.Errorf("got deny list %v, want delete_repository off and the rest on", gh.Deny)
				}
				if figma.URL != "https://figma.example.com/mcp" || figma.Headers["X-Figma-Token"] != "t-figma" {
					t.Errorf("got figma %q %v, want serverUrl as url and the token expanded", figma.URL, figma.Headers)
				}
			}},
		{"cline.json", map[string]server{"weather": {transport: TypeStdio}, "remote": {transport: TypeHTTP}, "legacy": {transport: TypeSSE}},
			[]string{"remote.autoApprove", "weather.autoApprove", "weather.timeout"}, nil},
		{"roo-code.json", map[string]server{"files": {transport: TypeStdio}, "hosted": {transport: TypeHTTP}},
			[]string{"files.alwaysAllow", "files.timeout", "files.watchPaths"},
			func(t *testing.T, cfg *Config) {
				if files := cfg.Servers["files"]; files.allowed("write_file") || !files.allowed("read_file") || files.Cwd != "/work" {
					t.Errorf("got files %+v, want write_file denied and cwd /work", files)
				}
			}},
		{"gemini-cli.json", map[string]server{"python": {transport: TypeStdio}, "http": {transport: TypeHTTP}, "sse": {transport: TypeHTTP}},
			[]string{"python.env.API_KEY", "python.timeout", "python.trust"},
			func(t *testing.T, cfg *Config) {
				py := cfg.Servers["python"]
				for tool, want := range map[string]bool{"safe_tool": true, "file_reader": true, "dangerous_tool": false, "other": false} {
					if got := py.allowed(tool); got != want {
						t.Errorf("got allowed(%q) %v, want %v", tool, got, want)
					}
				}
				if py.Env["API_KEY"] != "$MY_API_TOKEN" {
					t.Errorf("got API_KEY %q, want the bare $NAME as written", py.Env["API_KEY"])
				}
				if cfg.Servers["http"].URL != "http://localhost:3000/mcp" || cfg.Servers["http"].Type != TypeHTTP {
					t.Errorf("got http %+v, want httpUrl as a url of type http", cfg.Servers["http"])
				}
			}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			cfg, err := LoadConfig(filepath.Join("testdata", "clients", tc.file))
			if err != nil {
				t.Fatalf("got %v, want the file accepted", err)
			}
			if len(cfg.Servers) != len(tc.servers) {
				t.Errorf("got servers %v, want %d (disabled ones left out)", slices.Sorted(maps.Keys(cfg.Servers)), len(tc.servers))
			}
			for name, want := range tc.servers {
				sc, ok := cfg.Servers[name]
				if !ok {
					t.Errorf("got no server %q, want one", name)
					continue
				}
				if got := sc.transport(); got != want.transport {
					t.Errorf("%s: got transport %q, want %q", name, got, want.transport)
				}
				switch {
				case want.problem == "" && sc.problem != nil:
					t.Errorf("%s: got problem %v, want none", name, sc.problem)
				case want.problem != "" && (sc.problem == nil || !strings.Contains(sc.problem.Error(), want.problem)):
					t.Errorf("%s: got problem %v, want one containing %q", name, sc.problem, want.problem)
				}
			}
			var got []string
			for _, w := range cfg.Warnings {
				got = append(got, w.Server+"."+w.Field)
				if !strings.Contains(w.String(), `server "`+w.Server+`": field "`+w.Field+`" is ignored: `) || w.Reason == "" {
					t.Errorf("got warning %q, want it to name the server and the field and say why", w)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.warnings) {
				t.Errorf("got warnings %q, want %q", got, tc.warnings)
			}
			if tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}
}

// TestExpand covers the variable references of a config value.
func TestExpand(t *testing.T) {
	home, _ := os.UserHomeDir()
	env := map[string]string{"A": "alpha", "EMPTY": "", "API_TOKEN": "s3cret", "PLAIN": "p"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		in, want, err string
		secret        bool // the value substituted is a secret
	}{
		{in: "no references", want: "no references"},
		{in: "${A}", want: "alpha"},
		{in: "${env:A}/x/${A}", want: "alpha/x/alpha"},
		{in: "${MISSING:-fallback}", want: "fallback"},
		{in: "${EMPTY:-fallback}", want: "fallback"},
		{in: "${A:-fallback}", want: "alpha"},
		{in: "${env:MISSING:-d}", want: "d"},
		{in: "${EMPTY}", want: ""},
		{in: "${userHome}/x", want: home + "/x"},
		{in: "a${/}b", want: "a" + string(os.PathSeparator) + "b"},
		{in: "price $5 and ${ unterminated", want: "price $5 and ${ unterminated"},
		{in: "Bearer ${API_TOKEN}", want: "Bearer s3cret", secret: true},
		{in: "${PLAIN}", want: "p"},
		{in: "${MISSING}", err: "the environment variable MISSING is not set"},
		{in: "${input:key}", err: "${input:key} is a VS Code prompt"},
		{in: "${workspaceFolder}/a", err: "${workspaceFolder} has a value only inside VS Code"},
		{in: "${not a name}", err: "${not a name} is not a reference codemode knows"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			x := expander{lookup: lookup}
			got, err := x.expand(tc.in)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("got %q, %v; want an error containing %q", got, err, tc.err)
				}
			case err != nil || got != tc.want:
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
			if gotSecret := len(x.secrets) > 0; gotSecret != tc.secret {
				t.Errorf("got secrets %q, want a secret: %v", x.secrets, tc.secret)
			}
		})
	}
}

// TestExpandNamesFieldAndVariable: the problem of an entry whose variable
// is not set names the field and the variable, and never a value.
func TestExpandNamesFieldAndVariable(t *testing.T) {
	t.Setenv("CODEMODE_TEST_SET_TOKEN", "value-that-must-not-show")
	cfg, err := ParseConfig([]byte(`{"mcpServers": {"gh": {"url": "https://h/mcp", "headers": {
		"A": "${CODEMODE_TEST_SET_TOKEN}", "B": "Bearer ${CODEMODE_TEST_NOT_SET}"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Servers["gh"].problem
	if want := "headers.B: the environment variable CODEMODE_TEST_NOT_SET is not set"; p == nil || p.Error() != want {
		t.Errorf("got problem %v, want %q", p, want)
	}
	if !slices.Contains(cfg.Servers["gh"].secrets(), "value-that-must-not-show") {
		t.Error("got the expanded header missing from the secrets")
	}
}
