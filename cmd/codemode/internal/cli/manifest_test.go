package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A worker with --tools-from-cluster and no tool flags builds the front's
// tools from the manifest the front published — an MCP server from its
// --config (a real one, from npm), an --openapi document and the demo
// tools — and runs the front's programs with them. A worker with another
// state key refuses the manifest, and tool flags with the option are a
// usage error.
func TestWorkerToolsFromCluster(t *testing.T) {
	nodeBin, root := nodeSetup(t)
	everything := filepath.Join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	cfg := writeConfig(t, map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": nodeBin, "args": []string{everything}},
	}})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": %q, "name": "Rex"}`, strings.TrimPrefix(r.URL.Path, "/pets/"))
	}))
	defer api.Close()
	dir := t.TempDir()
	spec := filepath.Join(dir, "pets.json")
	if err := os.WriteFile(spec, []byte(`{"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"},
		"servers": [{"url": "`+api.URL+`"}],
		"paths": {"/pets/{id}": {"get": {"operationId": "getPet",
			"parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
			"responses": {"200": {"description": "a pet", "content": {"application/json": {"schema": {"type": "object"}}}}}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "cluster")
	key := filepath.Join(dir, "state.key")
	ctx := context.Background()
	cs, stderr, _ := startServe(t, ctx, "--config", cfg, "--openapi", spec+"=pets", "--demo-tools", "--data", data, "--state-key-file", key)

	var usage bytes.Buffer
	if code := Run([]string{"worker", "--tools-from-cluster", "--demo-tools", "--data", data}, strings.NewReader(""), &bytes.Buffer{}, &usage); code != exitUsage ||
		!strings.Contains(usage.String(), "give no --config, --openapi or --demo-tools") {
		t.Fatalf("tool flags with --tools-from-cluster: exit %d %s", code, usage.String())
	}
	var forged bytes.Buffer
	if code := Run([]string{"worker", "--tools-from-cluster", "--data", data, "--state-key-file", filepath.Join(dir, "other.key"), "--cache-dir", engineCache},
		strings.NewReader(""), &bytes.Buffer{}, &forged); code != exitFailure || !strings.Contains(forged.String(), "not authenticated by this state key") {
		t.Fatalf("a worker with another key: exit %d %s", code, forged.String())
	}

	worker, werr := startProcess(t, "worker", "--tools-from-cluster", "--data", data, "--state-key-file", key, "--cache-dir", engineCache)
	isErr, v := callExecute(t, cs, `const pet = await tools.pets.getPet({ id: "7" });
		const echo = await tools.everything.echo({ message: "hi" });
		return [pet.name, (await tools.shop.listOrders({})).orders.length, JSON.stringify(echo).includes("hi")]`)
	if isErr || v["ok"] != true || string(mustMarshal(v["value"])) != `["Rex",6,true]` {
		t.Fatalf("result = %v\nfront:\n%s\nworker:\n%s", v, stderr, werr)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(werr.String(), "msg=run ") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(werr.String(), "msg=run ") || strings.Contains(stderr.String(), "msg=run ") {
		t.Fatalf("the run was not the worker's:\nfront:\n%s\nworker:\n%s", stderr, werr)
	}
	_ = worker.Process.Signal(syscall.SIGTERM)
	if err := worker.Wait(); err != nil {
		t.Errorf("worker exit: %v\n%s", err, werr)
	}
}
