package mcp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
)

// repoRoot is the module root: tests run in the package directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// node returns the node binary, or skips the test when node or the
// pinned packages are missing.
func node(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot(t), "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Skip("the pinned npm packages are missing: run npm ci (make test does)")
	}
	path, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	return path
}

// npmBin is the script an npm package declares as its (first) binary.
// Packages are run through node by path rather than through
// node_modules/.bin, where two versions of one server would collide.
func npmBin(t *testing.T, pkg string) string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "node_modules", filepath.FromSlash(pkg))
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Skipf("%s is not installed: run npm ci", pkg)
	}
	var meta struct {
		Bin json.RawMessage `json:"bin"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	var one string
	if json.Unmarshal(meta.Bin, &one) == nil {
		return filepath.Join(dir, one)
	}
	var many map[string]string
	if err := json.Unmarshal(meta.Bin, &many); err != nil || len(many) == 0 {
		t.Fatalf("%s declares no binary", pkg)
	}
	for _, v := range many {
		return filepath.Join(dir, v)
	}
	return ""
}

// TestRealServers drives published servers: the current everything and
// filesystem servers, the everything server of April 2025 (protocol
// 2024-11-05 only), and a server on the 2025-03-26 TypeScript SDK. One
// program calls them in parallel and combines the results.
func TestRealServers(t *testing.T) {
	nodeBin := node(t)
	dir := t.TempDir()
	for name, text := range map[string]string{"a.txt": "alpha\nbeta\n", "b.txt": "gamma\n", "notes.md": "# notes\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The filesystem server resolves symlinks; so must the paths we pass.
	dir, _ = filepath.EvalSymlinks(dir)
	cfg := &Config{Servers: map[string]UpstreamConfig{
		"everything": {Command: nodeBin, Args: []string{npmBin(t, "@modelcontextprotocol/server-everything")}},
		"files":      {Command: nodeBin, Args: []string{npmBin(t, "@modelcontextprotocol/server-filesystem"), dir}},
		"legacy":     {Command: nodeBin, Args: []string{npmBin(t, "server-everything-2024-11-05")}},
		"old":        {Command: nodeBin, Args: []string{filepath.Join(repoRoot(t), "testdata", "mcp", "legacy-server.mjs")}},
	}}
	logger, logs := newLogRecorder()
	up := connect(t, cfg, ClientOptions{Logger: logger})
	for server, version := range map[string]string{"everything": "2025-11-25", "files": "2025-11-25", "legacy": "2024-11-05", "old": "2025-03-26"} {
		if want := "protocol=" + version + " "; !strings.Contains(connectedLine(logs(), server), want) {
			t.Errorf("%s: negotiated %q, want %s", server, connectedLine(logs(), server), version)
		}
	}

	res, m := run(t, up.Tools(), codemode.Options{Timeout: 30 * time.Second}, `
		const dir = `+strconv.Quote(dir)+`
		const [echo, sum, listing, files, legacySum, legacyEcho, stats, weather, image] = await Promise.all([
			tools.everything.echo({ message: "hi" }),
			tools.everything["get-sum"]({ a: 2, b: 3 }),
			tools.files.list_directory({ path: dir }),
			Promise.all(["a.txt", "b.txt"].map((f) => tools.files.read_text_file({ path: dir + "/" + f }))),
			tools.legacy.add({ a: 20, b: 22 }),
			tools.legacy.echo({ message: "old" }),
			tools.old.stats({ values: [1, 2, 3, 4] }),
			tools.everything["get-structured-content"]({ location: "New York" }),
			tools.everything["get-tiny-image"]({}),
		])
		const lines = files.map((f) => f.content.split("\n").filter(Boolean)).flat()
		const entries = listing.content.split("\n").filter(Boolean)
		const img = image.find((b) => b.type === "image")
		let invalid
		try { await tools.old.stats({ values: [] }) } catch (e) { invalid = e.message }
		return {
			echo, sum, legacySum, legacyEcho, stats, invalid,
			lines,
			textFiles: entries.filter((e) => e.endsWith(".txt")).length,
			weather: Object.keys(weather).sort(),
			image: { type: img.type, mimeType: img.mimeType, hasData: typeof img.data === "string", size: img.size },
		}`)
	if !res.OK {
		t.Log(logs())
	}
	mustOK(t, res)
	got, _ := json.Marshal(m["value"])
	want := `{"echo":"Echo: hi","image":{"hasData":true,"mimeType":"image/png","size":__SIZE__,"type":"image"},"invalid":"values must be a non-empty array of numbers","legacyEcho":"Echo: old","legacySum":"The sum of 20 and 22 is 42.","lines":["alpha","beta","gamma"],"stats":{"mean":2.5,"sum":10},"sum":"The sum of 2 and 3 is 5.","textFiles":2,"weather":["conditions","humidity","temperature"]}`
	var v map[string]any
	_ = json.Unmarshal(got, &v)
	size := v["image"].(map[string]any)["size"]
	want = strings.Replace(want, "__SIZE__", strconv.FormatFloat(size.(float64), 'f', -1, 64), 1)
	if string(got) != want {
		t.Errorf("value:\n got %s\nwant %s", got, want)
	}
	calls := len(res.ToolCalls)
	if calls != 11 {
		t.Errorf("%d tool calls, want 11", calls)
	}
}

// connectedLine is the "connected" log record of a server.
func connectedLine(logs, server string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "INFO connected ") && strings.HasSuffix(l, "server="+server) {
			return l
		}
	}
	return ""
}
