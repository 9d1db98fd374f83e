package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/codemode-go/codemode/internal/guest"
)

// TestGuestSeam keeps the language behind internal/guest: the root package
// imports neither the TypeScript front end nor the signature renderer, and
// of the packages it depends on, only the JavaScript implementation of the
// seam (internal/guest/js) does.
func TestGuestSeam(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	const mod = "github.com/codemode-go/codemode"
	languageOnly := []string{mod + "/internal/typescript", mod + "/internal/tsgen"}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		for _, imp := range strings.Fields(imports) {
			for _, lo := range languageOnly {
				if imp == lo && pkg != mod+"/internal/guest/js" {
					t.Errorf("%s imports %s; only internal/guest/js may", pkg, lo)
				}
			}
		}
	}
}

// runOnly is the Runtime's runner with its optional interfaces hidden, as
// a runner whose engine cannot suspend would be.
type runOnly struct{ guest.Runner }

// TestRunnerWithoutSuspend: a runner that is not a guest.Suspender still
// runs programs, and suspendable runs are refused before anything runs.
func TestRunnerWithoutSuspend(t *testing.T) {
	calls := 0
	tools := Tools{"ns": Tools{"get": Tool{Run: func(context.Context, json.RawMessage) (any, error) {
		calls++
		return 1, nil
	}}}}
	opts := Options{Tools: tools, StateKey: []byte("0123456789abcdef0123456789abcdef")}
	rt := mustNew(t, opts)
	_, s, err := rt.ExecuteSuspendable(context.Background(), "return await tools.ns.get({})")
	if err != nil || s == nil {
		t.Fatalf("a suspending runner: got %v, %v; want a suspended run", s, err)
	}

	hidden := mustNew(t, opts)
	hidden.sb = runOnly{hidden.sb}
	if _, ok := hidden.sb.(guest.Suspender); ok {
		t.Fatal("runOnly is a Suspender")
	}
	res, err := hidden.Execute(context.Background(), "return await tools.ns.get({})")
	if err != nil || !res.OK || string(res.Value) != "1" {
		t.Fatalf("Execute: got %+v, %v; want 1", res, err)
	}
	if _, _, err := hidden.ExecuteSuspendable(context.Background(), "return 2"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("ExecuteSuspendable: got %v, want errors.ErrUnsupported", err)
	}
	if _, _, err := hidden.Resume(context.Background(), s.State, CallResult{Index: s.Pending[0].Index, Output: json.RawMessage("3")}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Resume: got %v, want errors.ErrUnsupported", err)
	}
	if _, err := hidden.ImageSum(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("ImageSum: got %v, want errors.ErrUnsupported", err)
	}
	if calls != 1 {
		t.Errorf("the tool ran %d times, want once (by Execute)", calls)
	}
}
