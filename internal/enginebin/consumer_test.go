package enginebin

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// consumerMain is a program a `go get` user writes.
const consumerMain = `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/store"
)

func main() {
	rt, err := codemode.New(codemode.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer rt.Close()
	res, err := rt.Execute(context.Background(), "return 1+1")
	if err != nil || !res.OK {
		fmt.Fprintln(os.Stderr, err, res.Error)
		os.Exit(1)
	}
	fmt.Println(string(res.Value))

	// A run suspended at a tool call resumes in another Runtime.
	tools := codemode.Tools{"calc": codemode.Tools{"double": codemode.Tool{
		Run: func(_ context.Context, in json.RawMessage) (any, error) {
			var v struct{ N int }
			_ = json.Unmarshal(in, &v)
			return v.N * 2, nil
		}}}}
	key := []byte("consumer test key, 32 bytes long")
	first, _ := codemode.New(codemode.Options{Tools: tools, StateKey: key})
	_, s, err := first.ExecuteSuspendable(context.Background(), "return await tools.calc.double({ n: 21 })")
	first.Close()
	if err != nil || s == nil {
		fmt.Fprintln(os.Stderr, "not suspended:", err)
		os.Exit(1)
	}
	second, _ := codemode.New(codemode.Options{Tools: tools, StateKey: key})
	defer second.Close()
	res, s, err = second.Resume(context.Background(), s.State, second.RunPending(context.Background(), s.Pending[0]))
	if err != nil || s != nil || !res.OK {
		fmt.Fprintln(os.Stderr, "resume:", err, res.Error)
		os.Exit(1)
	}
	fmt.Println("resumed", string(res.Value))

	// Each step once, over a run store in a directory; a policy judges
	// the calls inside a transaction too.
	dir, _ := os.MkdirTemp("", "consumer-runs-")
	defer os.RemoveAll(dir)
	runs, err := store.OpenDirRuns(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rules, err := codemode.ParseRules("calc.double=ask,default=deny")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	third, _ := codemode.New(codemode.Options{Tools: tools, StateKey: key, Policy: rules.Policy()})
	defer third.Close()
	steps := codemode.Steps{Runtime: third, Runs: runs}
	_, s, err = steps.Start(context.Background(), "await tools.$codemode.begin({ touches: [\"calc.double\"] }); return await tools.calc.double({ n: 2 })")
	for s != nil && err == nil {
		res, s, err = steps.Resume(context.Background(), s.State, func(ctx context.Context, s *codemode.Suspended) ([]codemode.CallResult, error) {
			return []codemode.CallResult{third.RunPending(ctx, s.Pending[0])}, nil
		})
	}
	if err != nil || !res.OK {
		fmt.Fprintln(os.Stderr, "steps:", err, res.Error)
		os.Exit(1)
	}
	fmt.Println("once", string(res.Value))
}
`

// TestOutOfTreeConsumer is the issue "a Go module people can go get": a
// module that requires this one is built with plain `go build` (no tag)
// against a copy of the module without quickjs.wasm, as a module download
// has it, and the engine is then resolved at run time: fetched with npm
// into an empty cache, refused when corrupt, and reported with the fix
// when nothing has it. The command is built the same way, as `go install
// .../cmd/codemode@version` builds it.
func TestOutOfTreeConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module from scratch: tens of seconds")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	npm := needNpm(t)
	good := pinned(t)

	tmp := t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	modFile, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(modFile)
	mod := filepath.Join(tmp, "codemode")
	copyModule(t, root, mod)
	if _, err := os.Stat(filepath.Join(mod, "internal", "enginebin", "quickjs.wasm")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the module copy has quickjs.wasm (%v); want it missing, as in a module download", err)
	}

	consumer := filepath.Join(tmp, "consumer")
	writeFile(t, filepath.Join(consumer, "go.mod"), []byte("module example.com/consumer\n\n"+string(goLine)+"\n\n"+
		"require github.com/codemode-go/codemode v0.0.0\n\n"+
		"replace github.com/codemode-go/codemode => "+filepath.ToSlash(mod)+"\n"))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(consumer, "go.sum"), sum)
	writeFile(t, filepath.Join(consumer, "main.go"), []byte(consumerMain))

	// The environment's GOPROXY and module cache, no tags, no workspace.
	var base []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOFLAGS", "GOWORK", EnvWasm, EnvCacheDir:
			continue
		}
		base = append(base, kv)
	}
	// -p 1: one compile at a time leaves the other packages' tests, which
	// go test runs alongside this one, a processor for their timing cases.
	build := append(base[:len(base):len(base)], "GOFLAGS=-mod=mod -p=1", "GOWORK=off")
	bins := map[string]string{"consumer": filepath.Join(tmp, "bin", "consumer"), "codemode": filepath.Join(tmp, "bin", "codemode")}
	for _, args := range [][]string{
		{"build", "-o", bins["consumer"], "."},
		{"vet", "./..."},
		{"build", "-o", bins["codemode"], "github.com/codemode-go/codemode/cmd/codemode"},
	} {
		cmd := exec.Command(gobin, args...)
		cmd.Dir, cmd.Env = consumer, build
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	noNpm := t.TempDir() // a PATH with nothing on it
	withNpm := filepath.Dir(npm) + string(os.PathListSeparator) + os.Getenv("PATH")
	goodFile := writeFile(t, filepath.Join(tmp, "copy", "quickjs.wasm"), good)
	bad := corrupt(good)
	for i, tc := range []struct {
		name     string
		bin      string
		args     []string
		stdin    string
		npm      bool
		cache    []byte // the cache file before the run; nil for none
		envWasm  string
		wantExit int
		wantOut  string   // stdout contains
		wantErr  []string // stderr contains each
		filled   bool     // the cache holds the engine afterwards
	}{
		{name: "npm fills an empty cache", bin: "consumer", npm: true,
			wantOut: "2\nresumed 42\nonce 4", filled: true},
		{name: "no npm, empty cache", bin: "consumer", wantExit: 1,
			wantErr: []string{"no usable QuickJS-NG engine binary", "npm is not on PATH", EnvWasm,
				"go run github.com/codemode-go/codemode/cmd/codemode@latest engine install"}},
		{name: "corrupt cache, npm replaces it", bin: "consumer", npm: true, cache: bad,
			wantOut: "2\nresumed 42\nonce 4", filled: true},
		{name: "corrupt cache, no npm", bin: "consumer", cache: bad, wantExit: 1,
			wantErr: []string{"is not the pinned engine build", Sum(bad), "engine install"}},
		{name: "filled cache, no npm", bin: "consumer", cache: good,
			wantOut: "2\nresumed 42\nonce 4", filled: true},
		{name: "CODEMODE_ENGINE_WASM, no npm", bin: "consumer", envWasm: goodFile,
			wantOut: "2\nresumed 42\nonce 4"},
		{name: "engine path from the cache", bin: "codemode", args: []string{"engine", "path"}, cache: good,
			wantOut: "cache\t"},
		{name: "engine path without any", bin: "codemode", args: []string{"engine", "path"}, wantExit: 1,
			wantErr: []string{"engine install"}},
		{name: "engine install with npm", bin: "codemode", args: []string{"engine", "install"}, npm: true,
			wantOut: "quickjs.wasm", filled: true},
		{name: "engine install FILE without npm", bin: "codemode", args: []string{"engine", "install", goodFile},
			wantOut: "quickjs.wasm", filled: true},
		{name: "engine verify refuses a corrupt cache", bin: "codemode", args: []string{"engine", "verify"}, cache: bad,
			wantExit: 1, wantOut: "MISMATCH"},
		{name: "codemode run from the cache, no npm", bin: "codemode", args: []string{"run", "-"}, stdin: "return 1+1", cache: good,
			wantOut: `"value":2`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cacheRoot := filepath.Join(tmp, "cache", strconv.Itoa(i))
			if tc.cache != nil {
				writeFile(t, CachePath(cacheRoot), tc.cache)
			}
			path := noNpm
			if tc.npm {
				path = withNpm
			}
			// CODEMODE_CONFIG_DIR: the key that signs compiled code is
			// made there, not in the real per-user directory.
			env := append(base[:len(base):len(base)], "PATH="+path, EnvCacheDir+"="+cacheRoot, "CODEMODE_CONFIG_DIR="+filepath.Join(tmp, "config"))
			if tc.envWasm != "" {
				env = append(env, EnvWasm+"="+tc.envWasm)
			}
			cmd := exec.Command(bins[tc.bin], tc.args...)
			cmd.Env, cmd.Dir = env, tmp
			cmd.Stdin = strings.NewReader(tc.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			exit := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tc.wantExit {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", exit, tc.wantExit, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("stdout %q, want it to contain %q", stdout.String(), tc.wantOut)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr %q, want it to contain %q", stderr.String(), want)
				}
			}
			if tc.filled {
				if b, err := os.ReadFile(CachePath(cacheRoot)); err != nil || Sum(b) != SHA256 {
					t.Errorf("cache file afterwards: %v, SHA-256 %s; want the pinned engine", err, Sum(b))
				}
			}
		})
	}
}

// copyModule copies the module at src to dst as a module download has it:
// without what .gitignore keeps out (node_modules, quickjs.wasm, large
// test data, binaries) and without symbolic links.
func copyModule(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".git" || rel == "node_modules" || rel == "testdata/large" || rel == "bin" || rel == "codemode":
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.Type()&fs.ModeSymlink != 0, strings.HasSuffix(rel, ".wasm"), strings.HasSuffix(rel, ".test"):
			return nil
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
