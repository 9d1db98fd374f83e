package enginebin

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestOutOfTreeConsumer is what a `go get` user sees: a module that
// requires this one (a replace directive points at this checkout, whose
// files are what a module download holds; TestCommitted checks the engine
// is among them) is built with plain `go build`, offline, and run with no
// npm on PATH, an empty or missing HOME and nothing in the environment
// about the engine. The program must run, so the engine must be built in.
// The command is built the same way, as `go install
// .../cmd/codemode@version` builds it.
func TestOutOfTreeConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and links a module out of tree: tens of seconds")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	modFile, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(modFile)
	tmp := t.TempDir()
	consumer := filepath.Join(tmp, "consumer")
	writeFile(t, filepath.Join(consumer, "go.mod"), []byte("module example.com/consumer\n\n"+string(goLine)+"\n\n"+
		"require github.com/codemode-go/codemode v0.0.0\n\n"+
		"replace github.com/codemode-go/codemode => "+filepath.ToSlash(root)+"\n"))
	writeFile(t, filepath.Join(consumer, "go.sum"), sum)
	writeFile(t, filepath.Join(consumer, "main.go"), []byte(consumerMain))

	// The build reuses this machine's build and module caches (named
	// explicitly, since HOME is empty) and may not download anything.
	out, err := exec.Command(gobin, "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH", "CGO_ENABLED").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	var goenv map[string]string
	if err := json.Unmarshal(out, &goenv); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// Only what a Go build needs: nothing that names the engine, its
	// caches, npm or the user.
	var base []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "TMPDIR" || k == "SYSTEMROOT" || k == "LANG" {
			base = append(base, kv)
		}
	}
	build := append(base[:len(base):len(base)], "PATH="+withoutNpm(t),
		"HOME="+home, "GOCACHE="+goenv["GOCACHE"], "GOMODCACHE="+goenv["GOMODCACHE"], "GOPATH="+goenv["GOPATH"],
		"CGO_ENABLED="+goenv["CGO_ENABLED"], "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	bins := map[string]string{"consumer": filepath.Join(tmp, "bin", "consumer"), "codemode": filepath.Join(tmp, "bin", "codemode")}
	for _, args := range [][]string{
		{"build", "-o", bins["consumer"], "."},
		{"build", "-o", bins["codemode"], "github.com/codemode-go/codemode/cmd/codemode"},
	} {
		cmd := exec.Command(gobin, args...)
		cmd.Dir, cmd.Env = consumer, build
		if out, err := cmd.CombinedOutput(); err != nil {
			if bytes.Contains(out, []byte("GOPROXY=off")) {
				t.Skipf("the module cache lacks a dependency (run go mod download): %s", out)
			}
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	noPath := t.TempDir() // a PATH with nothing on it
	goodFile := writeFile(t, filepath.Join(tmp, "copy", "quickjs.wasm"), embedded)
	badFile := writeFile(t, filepath.Join(tmp, "copy", "bad.wasm"), corrupt(embedded))
	const want = "2\nresumed 42\nonce 4\n"
	for _, tc := range []struct {
		name     string
		bin      string
		args     []string
		stdin    string
		env      []string // beyond PATH and HOME
		noHome   bool     // no HOME at all
		wantExit int
		wantOut  string   // stdout contains
		wantErr  []string // stderr contains each
	}{
		{name: "empty HOME", bin: "consumer", wantOut: want},
		{name: "no HOME", bin: "consumer", noHome: true, wantOut: want},
		{name: "CODEMODE_ENGINE_WASM", bin: "consumer", env: []string{EnvWasm + "=" + goodFile}, wantOut: want},
		{name: "CODEMODE_ENGINE_WASM wrong", bin: "consumer", env: []string{EnvWasm + "=" + badFile}, wantExit: 1,
			wantErr: []string{"is not the pinned engine build", Sum(corrupt(embedded)), "unset " + EnvWasm}},
		{name: "codemode run", bin: "codemode", args: []string{"run", "-"}, stdin: "return 1+1", wantOut: `"value":2`},
		{name: "codemode run, no HOME", bin: "codemode", args: []string{"run", "-"}, stdin: "return 1+1", noHome: true, wantOut: `"value":2`},
		{name: "codemode engine path", bin: "codemode", args: []string{"engine", "path"}, wantOut: "embedded\t"},
		{name: "codemode engine verify", bin: "codemode", args: []string{"engine", "verify"},
			wantOut: "embedded\tbuilt into this binary\t" + SHA256 + "\tok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(base[:len(base):len(base)], "PATH="+noPath)
			if !tc.noHome {
				env = append(env, "HOME="+t.TempDir())
			}
			cmd := exec.Command(bins[tc.bin], tc.args...)
			cmd.Env, cmd.Dir = append(env, tc.env...), tmp
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
		})
	}
}

// withoutNpm returns a PATH that finds what this one finds, npm and the
// other JavaScript package managers apart: one directory of links to the
// first of each name, so a build that ran npm would fail. A C compiler
// calls the assembler and linker through PATH, so an empty one will not do.
func withoutNpm(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	skip := map[string]bool{"npm": true, "npx": true, "node": true, "corepack": true, "yarn": true, "pnpm": true}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if skip[strings.TrimSuffix(strings.ToLower(name), ".exe")] || e.IsDir() {
				continue
			}
			if err := os.Symlink(filepath.Join(d, name), filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrExist) {
				t.Skipf("cannot link %s: %v", name, err)
			}
		}
	}
	return dir
}
