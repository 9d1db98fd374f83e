package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cmd/codemode/internal/demo"
	"github.com/codemode-go/codemode/mcp"
	"github.com/codemode-go/codemode/openapi"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sourceFlags are the flags that give a command its tools, the same for
// every command: MCP servers from a config file, OpenAPI documents, the
// demo tools. Credentials are read from environment variables named by
// flags, never from the flags themselves, so they stay out of shell
// history and process lists.
type sourceFlags struct {
	config         string
	requireAll     bool
	connectTimeout duration
	callTimeout    duration
	logLevel       string
	// askUsers: the --config servers may ask the users of this server's
	// clients (elicitation); set by codemode mcp.
	askUsers bool

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

// register adds the source flags. calls says whether the command calls
// tools (run, mcp), which --call-timeout bounds; logLevel is the default
// of --log-level.
func (s *sourceFlags) register(fs *flag.FlagSet, calls bool, logLevel string) {
	fs.StringVar(&s.config, "config", "", "MCP servers `file`, as MCP clients write it: {\"mcpServers\": {\"name\": {\"command\": ...} or {\"url\": ...}}}")
	fs.BoolVar(&s.requireAll, "require-all", false, "fail when any --config server cannot be started, instead of going on without it")
	s.connectTimeout = duration(mcp.DefaultConnectTimeout)
	fs.Var(&s.connectTimeout, "connect-timeout", "time limit for starting an MCP server and listing its tools, a `duration` such as 30s")
	if calls {
		fs.Var(&s.callTimeout, "call-timeout", "time limit of one MCP tool call, a `duration`; past it the call fails and the run goes on (0 = the run's limit)")
	}
	fs.StringVar(&s.logLevel, "log-level", logLevel, "least severe log `level` written to standard error: debug, info, warn or error")
	fs.BoolVar(&s.demoTools, "demo-tools", false, "give programs the built-in demo tools (in memory)")
	fs.Var(&s.openapis, "openapi", "an OpenAPI 3 document (JSON or YAML) as tools, at `PATH[=namespace]` (repeatable; the namespace defaults to one derived from the title)")
	fs.StringVar(&s.baseURL, "base-url", "", "base URL for the --openapi APIs, overriding their servers")
	fs.StringVar(&s.bearerEnv, "bearer-env", "", "environment variable `NAME` holding the bearer token for the APIs' bearer and OAuth schemes")
	fs.StringVar(&s.basicEnv, "basic-env", "", "environment variable `NAME` holding user:password for the APIs' basic-auth schemes")
	fs.Var(&s.apikeyEnv, "apikey-env", "environment variable NAME holds the API key of security scheme SCHEME, given as `SCHEME=NAME` (repeatable)")
}

// logger is the log the flags ask for, on stderr; stamped says whether
// records carry the time (a long-running server's do, a one-shot
// command's need not).
func (s *sourceFlags) logger(stderr io.Writer, stamped bool) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q is not debug, info, warn or error", s.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	if !stamped {
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	return slog.New(slog.NewTextHandler(stderr, opts)), nil
}

// startError marks a failure to start the tool sources (a --config server
// under --require-all), as opposed to a usage error: exit status 1, not 2.
type startError struct{ error }

func (e startError) Unwrap() error { return e.error }

// exitFor is the exit status for an error of open.
func exitFor(err error) int {
	if errors.As(err, new(startError)) {
		return exitFailure
	}
	return exitUsage
}

// toolSource is what the source flags opened: fixed tools (OpenAPI
// documents, the demo tools) and the MCP servers of --config, whose tools
// change as servers come, go and announce new tools.
type toolSource struct {
	fixed  codemode.Tools
	up     *mcp.Upstreams // nil without --config
	closed sync.Once
	// asker puts the servers' questions (elicitations) to the user of the
	// MCP client whose program made the call, once the server exists.
	asker atomic.Pointer[mcp.Server]
}

// open loads every source, connecting the --config servers: all of them
// or fail under --require-all, else the ones that start, the others being
// logged and retried in the background. With background (and without
// --require-all) it returns before the servers have answered, and they
// arrive on changed. Close the result.
func (s *sourceFlags) open(ctx context.Context, logger *slog.Logger, background bool) (*toolSource, error) {
	cfg := &mcp.Config{}
	if s.config != "" {
		var err error
		if cfg, err = mcp.LoadConfig(s.config); err != nil {
			return nil, err
		}
		for _, w := range cfg.Warnings {
			logger.Warn("config field ignored", "file", s.config, "server", w.Server, "field", w.Field, "reason", w.Reason)
		}
		if err := s.noSelf(cfg, logger); err != nil {
			return nil, err
		}
	}
	fixed, err := s.fixedTools(logger)
	if err != nil {
		return nil, err
	}
	for name := range cfg.Servers {
		if _, clash := fixed[name]; clash {
			return nil, fmt.Errorf("the namespace %q is both a configured server and another source's", name)
		}
	}
	src := &toolSource{fixed: fixed}
	if len(cfg.Servers) == 0 {
		return src, nil
	}
	var elicit func(context.Context, string, *mcpsdk.ElicitParams) (*mcpsdk.ElicitResult, error)
	if background && s.askUsers {
		// A server whose runs are its own: its clients' users can be
		// asked.
		elicit = func(ctx context.Context, server string, p *mcpsdk.ElicitParams) (*mcpsdk.ElicitResult, error) {
			if srv := src.asker.Load(); srv != nil {
				return srv.AnswerElicitation(ctx, server, p)
			}
			return &mcpsdk.ElicitResult{Action: "decline"}, nil
		}
	}
	src.up, err = mcp.Connect(ctx, cfg, mcp.ClientOptions{
		Elicit:         elicit,
		Version:        version(),
		Logger:         logger,
		ConnectTimeout: time.Duration(s.connectTimeout),
		CallTimeout:    time.Duration(s.callTimeout),
		Lenient:        !s.requireAll,
		Background:     background && !s.requireAll,
		LoginCommand:   s.loginCommand,
	})
	if err != nil {
		if errors.Is(err, mcp.ErrInvalidConfig) {
			return nil, err
		}
		return nil, startError{err}
	}
	// Every server's namespace is in the tree from the start, so a clash
	// with another source shows now or never.
	if _, err := codemode.Merge(src.up.Tools(), fixed); err != nil {
		src.close()
		return nil, fmt.Errorf("an MCP server and an --openapi document: %w", err)
	}
	return src, nil
}

// loginCommand is the command that authorizes a --config server that
// asks for OAuth. The path is absolute: the message reaches a person
// through an MCP client app, whose directory is not theirs.
func (s *sourceFlags) loginCommand(server string) string {
	path := s.config
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if strings.ContainsAny(path, " '\"$`") {
		path = "'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
	}
	return "codemode login " + server + " --config " + path
}

// tools is the current tool tree.
func (t *toolSource) tools() codemode.Tools {
	if t.up == nil {
		return t.fixed
	}
	all, _ := codemode.Merge(t.up.Tools(), t.fixed) // checked by open
	return all
}

// unavailable lists the servers not offering tools yet.
func (t *toolSource) unavailable() []mcp.Unavailable {
	if t.up == nil {
		return nil
	}
	return t.up.Unavailable()
}

// changed signals that tools() changed; nil (never) without servers.
func (t *toolSource) changed() <-chan struct{} {
	if t.up == nil {
		return nil
	}
	return t.up.Changed()
}

// close stops the servers.
func (t *toolSource) close() {
	t.closed.Do(func() {
		if t.up != nil {
			_ = t.up.Close()
		}
	})
}

// fixedTools builds the tools that do not change: the demo tools and the
// OpenAPI documents. Skipped operations are logged as warnings.
func (s *sourceFlags) fixedTools(logger *slog.Logger) (codemode.Tools, error) {
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
		if err := codemode.CheckName(ns); err != nil || ns == codemode.BuiltinNamespace {
			return nil, fmt.Errorf("--openapi %s: %q is not a usable namespace; give one with PATH=namespace", path, ns)
		}
		if tools, err = codemode.Merge(tools, codemode.Tools{ns: withCredentialHint(api.Tools)}); err != nil {
			return nil, fmt.Errorf("--openapi %s: %w; give another namespace with PATH=namespace", path, err)
		}
		for _, sk := range api.Skipped {
			logger.Warn("OpenAPI operation skipped", "file", path, "operation", sk.Operation, "reason", sk.Reason)
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
	return func(ctx context.Context, req openapi.CredentialRequest) (openapi.Credential, error) {
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
		if m, ok := ctx.Value(missingKey{}).(*missing); ok {
			m.add(req)
		}
		return openapi.Credential{}, openapi.ErrNoCredential
	}, nil
}

// missingKey carries a call's *missing in its context.
type missingKey struct{}

// missing collects the security schemes a call found no credential for.
type missing struct {
	mu      sync.Mutex
	schemes []openapi.CredentialRequest
}

func (m *missing) add(req openapi.CredentialRequest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.schemes = append(m.schemes, req)
}

// withCredentialHint wraps the tools of an OpenAPI document so that a
// call refused for want of credentials says which flag gives them: the
// openapi package can only say that the host has to.
func withCredentialHint(tools codemode.Tools) codemode.Tools {
	out := make(codemode.Tools, len(tools))
	for name, n := range tools {
		switch n := n.(type) {
		case codemode.Tools:
			out[name] = withCredentialHint(n)
		case codemode.Tool:
			run := n.Run
			n.Run = func(ctx context.Context, input json.RawMessage) (any, error) {
				m := &missing{}
				v, err := run(context.WithValue(ctx, missingKey{}, m), input)
				if err != nil && len(m.schemes) > 0 && strings.Contains(err.Error(), "no credentials available") {
					return v, codemode.ToolErrorCause(err.Error()+": "+credentialHint(m.schemes), err)
				}
				return v, err
			}
			out[name] = n
		default:
			out[name] = n
		}
	}
	return out
}

// credentialHint names the flags that would give the missing schemes
// their credentials.
func credentialHint(reqs []openapi.CredentialRequest) string {
	var flags []string
	seen := map[string]bool{}
	for _, r := range reqs {
		var f string
		switch r.Type {
		case "bearer":
			f = "--bearer-env NAME"
		case "basic":
			f = "--basic-env NAME (holding user:password)"
		case "apiKey":
			f = "--apikey-env " + r.Scheme + "=NAME"
		default:
			continue
		}
		if !seen[f] {
			seen[f] = true
			flags = append(flags, f)
		}
	}
	return "start codemode with " + strings.Join(flags, " or ") + ", where NAME is an environment variable that holds the credential"
}

// nestingEnv carries to the servers codemode starts how deep in codemode
// processes they are: a config that lists codemode itself (Claude
// Desktop's and Cursor's files often do), perhaps through a wrapper such
// as npx or a script, would otherwise start codemode after codemode until
// something else gave out.
const nestingEnv = "CODEMODE_NESTING"

// maxNesting is how deep codemode processes may be started by each other
// through configs: one codemode in front of another is allowed, a third
// is refused.
const maxNesting = 2

// noSelf drops the servers of cfg that are this program itself, and
// refuses every server when this process is already nested maxNesting
// deep; the servers it keeps learn their depth.
func (s *sourceFlags) noSelf(cfg *mcp.Config, logger *slog.Logger) error {
	depth, _ := strconv.Atoi(os.Getenv(nestingEnv))
	if depth >= maxNesting && len(cfg.Servers) > 0 {
		return fmt.Errorf("--config %s: this codemode was started by codemode %d levels up (%s=%d): a config lists codemode, perhaps through a wrapper, and starting its servers would go on without end; remove codemode from the config", s.config, depth, nestingEnv, depth)
	}
	self := ""
	if exe, err := os.Executable(); err == nil {
		self = exe
	}
	for name, sc := range cfg.Servers {
		if sc.Command == "" {
			continue
		}
		if self != "" && sameProgram(sc.Command, sc.Cwd, self) {
			if s.requireAll {
				return fmt.Errorf("--config %s: the server %q is codemode itself (%s): it would start codemode again, and again", s.config, name, sc.Command)
			}
			logger.Error("a config server is codemode itself and was not started: it would start codemode again, and again", "server", name, "command", sc.Command)
			delete(cfg.Servers, name)
			continue
		}
		env := make(map[string]string, len(sc.Env)+1)
		maps.Copy(env, sc.Env)
		env[nestingEnv] = strconv.Itoa(depth + 1)
		sc.Env = env
		cfg.Servers[name] = sc
	}
	return nil
}

// sameProgram reports whether command (as a config names it, found in
// PATH or from cwd) is the executable self.
func sameProgram(command, cwd, self string) bool {
	path := command
	if !strings.ContainsRune(command, filepath.Separator) {
		p, err := exec.LookPath(command)
		if err != nil {
			return false
		}
		path = p
	} else if !filepath.IsAbs(command) && cwd != "" {
		path = filepath.Join(cwd, command)
	}
	a, err := os.Stat(path)
	if err != nil {
		return false
	}
	b, err := os.Stat(self)
	return err == nil && os.SameFile(a, b)
}
