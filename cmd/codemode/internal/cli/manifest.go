package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cluster"
	"github.com/codemode-go/codemode/internal/secret"
)

// toolManifest is what a front publishes for workers to build its tool
// tree (cluster.Node.PublishManifest): its tool flags, with the files
// they name inlined. Credentials travel as the names of environment
// variables, as on the command line: each worker reads its own.
type toolManifest struct {
	Config         json.RawMessage `json:"config,omitempty"`
	OpenAPI        []manifestSpec  `json:"openapi,omitempty"`
	DemoTools      bool            `json:"demoTools,omitempty"`
	BaseURL        string          `json:"baseURL,omitempty"`
	BearerEnv      string          `json:"bearerEnv,omitempty"`
	BasicEnv       string          `json:"basicEnv,omitempty"`
	APIKeyEnv      []string        `json:"apikeyEnv,omitempty"`
	RequireAll     bool            `json:"requireAll,omitempty"`
	ConnectTimeout time.Duration   `json:"connectTimeout,omitempty"`
	CallTimeout    time.Duration   `json:"callTimeout,omitempty"`
}

type manifestSpec struct {
	Namespace string `json:"namespace,omitempty"`
	Doc       []byte `json:"doc"`
}

// manifest is the manifest of the flags' tools.
func (s *sourceFlags) manifest() ([]byte, error) {
	m := toolManifest{DemoTools: s.demoTools, BaseURL: s.baseURL, BearerEnv: s.bearerEnv, BasicEnv: s.basicEnv,
		APIKeyEnv: s.apikeyEnv, RequireAll: s.requireAll, ConnectTimeout: time.Duration(s.connectTimeout), CallTimeout: time.Duration(s.callTimeout)}
	if s.config != "" {
		b, err := os.ReadFile(s.config)
		if err != nil {
			return nil, err
		}
		if !json.Valid(b) {
			return nil, fmt.Errorf("--config %s is not JSON", s.config)
		}
		m.Config = b
	}
	for _, arg := range s.openapis {
		path, ns, _ := strings.Cut(arg, "=")
		doc, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--openapi: %w", err)
		}
		m.OpenAPI = append(m.OpenAPI, manifestSpec{Namespace: ns, Doc: doc})
	}
	return json.Marshal(m)
}

// fromManifest sets the flags' tool sources to a manifest's, its files
// written under dir.
func (s *sourceFlags) fromManifest(b []byte, dir string) error {
	var m toolManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("the published tool manifest: %w", err)
	}
	s.demoTools, s.baseURL, s.bearerEnv, s.basicEnv = m.DemoTools, m.BaseURL, m.BearerEnv, m.BasicEnv
	s.apikeyEnv, s.requireAll = m.APIKeyEnv, m.RequireAll
	s.connectTimeout, s.callTimeout = duration(m.ConnectTimeout), duration(m.CallTimeout)
	s.config, s.openapis = "", nil
	if len(m.Config) > 0 {
		// As the front's: a server's command is found in PATH or the
		// working directory, its cwd is absolute, and ${NAME} in its
		// env, args and headers is this process's environment.
		p := filepath.Join(dir, "config.json")
		if err := os.WriteFile(p, m.Config, 0o600); err != nil {
			return err
		}
		s.config = p
	}
	for i, spec := range m.OpenAPI {
		p := filepath.Join(dir, fmt.Sprintf("openapi-%d", i))
		if err := os.WriteFile(p, spec.Doc, 0o600); err != nil {
			return err
		}
		arg := p
		if spec.Namespace != "" {
			arg += "=" + spec.Namespace
		}
		s.openapis = append(s.openapis, arg)
	}
	return nil
}

// usesTools reports whether any tool flag is set.
func (s *sourceFlags) usesTools() bool {
	return s.config != "" || len(s.openapis) > 0 || s.demoTools
}

// publishManifest publishes the front's tools for the workers.
func publishManifest(ctx context.Context, node *cluster.Node, sf *sourceFlags, keyFile string, logger *slog.Logger) error {
	b, err := sf.manifest()
	if err != nil {
		return err
	}
	key, err := secret.Key(keyFile, codemode.MinStateKeyBytes)
	if err != nil {
		return fmt.Errorf("state key: %w", err)
	}
	if err := node.PublishManifest(ctx, key, b); err != nil {
		return err
	}
	logger.Info("tool manifest published: workers started with --tools-from-cluster build the same tools", "bytes", len(b))
	return nil
}

// manifestSources reads the published manifest and opens its tools.
// dir keeps the files it names until the process ends.
func manifestSources(ctx context.Context, node *cluster.Node, key []byte, sf *sourceFlags, logger *slog.Logger) (*toolSource, func(), error) {
	var b []byte
	var err error
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		b, err = node.Manifest(ctx, key)
		if !errors.Is(err, cluster.ErrNoManifest) {
			break
		}
		logger.Info("waiting for a front to publish its tools", "retry", wait)
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(wait):
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return sourcesOf(ctx, b, sf, logger)
}

// sourcesOf opens the tools of manifest b.
func sourcesOf(ctx context.Context, b []byte, sf *sourceFlags, logger *slog.Logger) (*toolSource, func(), error) {
	dir, err := os.MkdirTemp("", "codemode-manifest-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	mf := *sf
	if err := mf.fromManifest(b, dir); err != nil {
		cleanup()
		return nil, nil, err
	}
	src, err := mf.open(ctx, logger, false)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return src, cleanup, nil
}
