// Package tsctest type-checks rendered TypeScript with the project's
// pinned tsc (npm typescript, installed by `make test`). It is test
// support: a test that uses it skips, with the reason, when node or the
// compiler is absent.
package tsctest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode/internal/tsgen"
)

// Compiler returns the path of tsc, or skips the test.
func Compiler(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short mode: runs the TypeScript compiler")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH; the tsc check needs Node.js")
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("repository root not found")
		}
		dir = parent
	}
	tsc := filepath.Join(dir, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Skipf("%s is missing; run `npm ci` at the repository root (make test does)", tsc)
	}
	return tsc
}

// Declarations accumulates tool signatures as TypeScript declarations.
type Declarations struct {
	b        strings.Builder
	n        int
	declared map[string]bool
}

// AddTypes adds the declarations of the named types names, and of the
// types they use in turn, each once. lookup returns a type's declaration
// and the names it uses; a name it does not know is an error.
func (d *Declarations) AddTypes(names []string, lookup func(name string) (decl string, uses []string, ok bool)) error {
	if d.declared == nil {
		d.declared = map[string]bool{}
	}
	queue := append([]string(nil), names...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if d.declared[name] {
			continue
		}
		d.declared[name] = true
		decl, uses, ok := lookup(name)
		if !ok {
			return fmt.Errorf("type %s has no declaration", name)
		}
		fmt.Fprintf(&d.b, "%s\n\n", decl)
		queue = append(queue, uses...)
	}
	return nil
}

// Types is how many named types were declared.
func (d *Declarations) Types() int { return len(d.declared) }

// AddSignature adds one rendered signature of the tool at path. The access
// expression (tools.ns["x"]) is checked as an expression; the parameter
// and return types are checked by declaring a function with exactly the
// rendered text after it.
func (d *Declarations) AddSignature(path []string, signature string) error {
	access := tsgen.AccessPath(path)
	i := strings.Index(signature, access+"(")
	if i < 0 {
		return fmt.Errorf("signature of %s does not contain %s(", strings.Join(path, "."), access)
	}
	d.n++
	fmt.Fprintf(&d.b, "// %s\n%s;\n", strings.Join(path, "."), access)
	fmt.Fprintf(&d.b, "%sdeclare function sig%d%s;\n\n", signature[:i], d.n, signature[i+len(access):])
	return nil
}

// Len is the number of signatures added.
func (d *Declarations) Len() int { return d.n }

// Check compiles the declarations with tsc --strict and fails the test
// with the compiler's output when they do not type-check.
func (d *Declarations) Check(t testing.TB, tsc string) {
	t.Helper()
	dir := t.TempDir()
	src := "declare const tools: any;\n\n" + d.b.String()
	if err := os.WriteFile(filepath.Join(dir, "signatures.ts"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	config := `{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022", "lib": ["es2022"], "types": [], "skipLibCheck": true}, "files": [` + strconv.Quote("signatures.ts") + `]}`
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tsc, "-p", "tsconfig.json", "--pretty", "false")
	cmd.Dir = dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("tsc --strict type-checked %d signatures (%d bytes) in %s", d.n, len(src), time.Since(start).Round(time.Millisecond))
	if err != nil {
		lines := strings.Split(string(out), "\n")
		if len(lines) > 30 {
			lines = append(lines[:30], fmt.Sprintf("... %d more lines", len(lines)-30))
		}
		t.Errorf("tsc: %v\n%s", err, strings.Join(lines, "\n"))
	}
}
