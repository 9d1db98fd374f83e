package tsgen

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const stressSchemas = 500

// tsFile accumulates declarations for the TypeScript compiler and
// remembers which case produced each line, to explain compiler errors.
type tsFile struct {
	name    string
	b       strings.Builder
	lines   int
	origins map[int]string // first line of a declaration -> its origin
	count   int
}

func newTSFile(name string) *tsFile {
	return &tsFile{name: name, origins: map[int]string{}}
}

func (f *tsFile) add(origin, decl string) {
	f.origins[f.lines+1] = origin
	f.b.WriteString(decl)
	f.b.WriteString("\n")
	f.lines += strings.Count(decl, "\n") + 1
	f.count++
}

// addType checks the exact text that Type returned.
func (f *tsFile) addType(origin, typ string) {
	f.add(origin, fmt.Sprintf("type %s_T%d = %s;", f.name, f.count, typ))
}

// addSignature checks the exact text that Signature returned: the access
// path as an expression on an untyped tools object, and the JSDoc,
// parameter list and return type as a function declaration. Nothing in
// the text is rewritten; the path prefix is only replaced by a name.
func (f *tsFile) addSignature(t *testing.T, origin string, path []string, sig string) {
	t.Helper()
	doc := ""
	if strings.HasPrefix(sig, "/**") {
		end := strings.Index(sig, "*/\n")
		if end < 0 {
			t.Fatalf("%s: unterminated JSDoc in %q", origin, sig)
		}
		doc, sig = sig[:end+3], sig[end+3:]
	}
	prefix := AccessPath(path)
	rest, ok := strings.CutPrefix(sig, prefix+"(")
	if !ok {
		t.Fatalf("%s: signature %q does not start with %q", origin, sig, prefix+"(")
	}
	f.add(origin, fmt.Sprintf("void %s;", prefix))
	f.add(origin, fmt.Sprintf("%sdeclare function %s_F%d(%s;", doc, f.name, f.count, rest))
}

// explain maps a compiler error's line to the declaration that produced it.
func (f *tsFile) explain(line int) string {
	for l := line; l > 0; l-- {
		if o, ok := f.origins[l]; ok {
			return o
		}
	}
	return "?"
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}

// TestTypeScriptCompiles renders every golden case, a seeded stress corpus
// and, when installed, every schema of GitHub's REST API description, and
// compiles the results with tsc --strict. It is the check that the output
// is TypeScript at all, which no golden can show.
func TestTypeScriptCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: runs the TypeScript compiler")
	}
	root := repoRoot(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH; the tsc check needs Node.js (and `npm install` at the repo root)")
	}
	tsc := filepath.Join(root, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Skipf("%s is missing; run `npm install` at the repo root to enable the tsc check", tsc)
	}

	files := []*tsFile{goldenFile(t), stressFile(t)}
	if gh := githubFile(t, root); gh != nil {
		files = append(files, gh)
	}

	// The directory outlives a failing test, for reading the errors.
	dir, err := os.MkdirTemp("", "tsgen-tsc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	prelude := newTSFile("prelude")
	prelude.add("prelude", "declare const tools: any;")
	files = append([]*tsFile{prelude}, files...)
	var names []string
	total := 0
	for _, f := range files {
		name := f.name + ".ts"
		names = append(names, strconv.Quote(name))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(f.b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d declarations, %d bytes", name, f.count, f.b.Len())
		if f != prelude {
			total += f.count
		}
	}
	// The declarations are scripts, not modules, so that every file shares
	// one global scope; the names are unique per file.
	config := `{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022",
  "lib": ["es2022"], "types": [], "skipLibCheck": true}, "files": [` + strings.Join(names, ", ") + `]}`
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tsc, "-p", filepath.Join(dir, "tsconfig.json"), "--noEmit", "--strict", "--pretty", "false")
	cmd.Dir = dir // so that errors name files as tscError expects
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	t.Logf("tsc --strict type-checked %d declarations in %s", total, elapsed.Round(time.Millisecond))
	if err != nil {
		t.Errorf("tsc failed: %v\n%s", err, explainErrors(dir, files, out))
	}
}

var tscError = regexp.MustCompile(`^(\w+)\.ts\((\d+),\d+\): (.*)$`)

func explainErrors(dir string, files []*tsFile, out []byte) string {
	byName := map[string]*tsFile{}
	for _, f := range files {
		byName[f.name] = f
	}
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	shown := 0
	for sc.Scan() && shown < 40 {
		line := sc.Text()
		b.WriteString(line + "\n")
		m := tscError.FindStringSubmatch(line)
		if m == nil || byName[m[1]] == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		fmt.Fprintf(&b, "    from %s (see %s)\n", byName[m[1]].explain(n), filepath.Join(dir, m[1]+".ts"))
		shown++
	}
	return b.String()
}

func goldenFile(t *testing.T) *tsFile {
	f := newTSFile("golden")
	for _, c := range loadCases(t) {
		for _, pretty := range []bool{false, true} {
			origin := fmt.Sprintf("golden case %s (pretty=%v)", c.name, pretty)
			if c.sig != nil {
				f.addSignature(t, origin, c.sig.Path, c.render(pretty))
			} else {
				f.addType(origin, c.render(pretty))
			}
		}
	}
	return f
}

func stressFile(t *testing.T) *tsFile {
	f := newTSFile("stress")
	g := newSchemaGen(1)
	for i := 0; i < stressSchemas; i++ {
		doc := g.document()
		origin := fmt.Sprintf("stress schema %d: %s", i, doc)
		f.addType(origin, Type(doc, false))
		f.addType(origin, Type(doc, true))
		if i%4 == 0 {
			out := g.document()
			path := g.path()
			for _, pretty := range []bool{false, true} {
				var tags []string
				if i%8 == 0 { // tags must not upset tsc either
					tags = []string{"@destructive", "@idempotent", "@openworld"}
				}
				sig := Signature(path, g.pick(genDocs), tags, doc, out, pretty)
				f.addSignature(t, origin, path, sig)
			}
		}
	}
	return f
}

// githubFile renders every entry of components/schemas in GitHub's REST
// API description (npm @octokit/openapi, extracted by `make specs`) with
// the whole document as the root, as a caller with an OpenAPI document
// would. It returns nil when the file is absent.
func githubFile(t *testing.T, root string) *tsFile {
	path := filepath.Join(root, "testdata", "large", "api.github.com.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Logf("GitHub OpenAPI description not present (%v; run `make specs`); checking without it", err)
		return nil
	}
	start := time.Now()
	doc, ok := parse(data)
	if !ok {
		t.Fatalf("%s does not parse", path)
	}
	comps, _ := doc.(*object).vals["components"].(*object)
	schemas, _ := comps.vals["schemas"].(*object)
	if schemas == nil || len(schemas.keys) < 100 {
		t.Fatalf("%s has no components/schemas", path)
	}
	f := newTSFile("github")
	for _, name := range schemas.keys {
		ref := "#/components/schemas/" + pointerToken(name)
		for _, pretty := range []bool{false, true} {
			r := newRenderer(doc)
			f.addType("components/schemas/"+name, format(r.ref(ref, 0), pretty))
		}
	}
	t.Logf("rendered %d GitHub schemas in %s", len(schemas.keys), time.Since(start).Round(time.Millisecond))
	return f
}

func pointerToken(s string) string {
	return url.PathEscape(strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
}
