package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codemode-go/codemode/cmd/codemode/internal/demo"
)

// cliEnv makes the test binary run the command line in cliArgsEnv (a JSON
// array), so a test can run codemode in processes of its own.
const (
	cliEnv     = "CODEMODE_TEST_CLI_MAIN"
	cliArgsEnv = "CODEMODE_TEST_CLI_ARGS"
)

func init() {
	if os.Getenv(cliEnv) == "1" {
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv(cliArgsEnv)), &args); err != nil {
			os.Exit(exitUsage)
		}
		os.Exit(Run(args, os.Stdin, os.Stdout, os.Stderr))
	}
}

// codemodeProcess runs the command line in a new process and returns its
// exit status, standard output and standard error.
func codemodeProcess(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	a, _ := json.Marshal(args)
	cmd.Env = append(os.Environ(), cliEnv+"=1", cliArgsEnv+"="+string(a))
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

const refundProgram = `const { orders } = await tools.shop.listOrders({ status: "open" })
const big = orders.filter((o) => o.totalCents > 1000)
console.log("refunding", big.map((o) => o.id).join(", "))
const done = []
for (const o of big) {
  try {
    done.push(await tools.shop.refundOrder({ orderId: o.id, reason: "damaged in transit" }))
  } catch (e) {
    done.push({ orderId: o.id, refused: e.message })
  }
}
return done`

// withoutDurations is a Result's JSON with every durationMs and startMs
// zero.
func withoutDurations(t *testing.T, out string) map[string]any {
	t.Helper()
	m := decode(t, out)
	calls, _ := m["toolCalls"].([]any)
	for _, c := range calls {
		c.(map[string]any)["durationMs"] = 0.0
		c.(map[string]any)["startMs"] = 0.0
	}
	return m
}

// TestSuspendResumeAcrossProcesses runs programs straight through and
// suspended, each step in a process of its own (the state crosses only
// as a file), and compares the Results.
func TestSuspendResumeAcrossProcesses(t *testing.T) {
	cache := t.TempDir()
	key := filepath.Join(t.TempDir(), "key")
	programs := map[string]string{
		"demo":   demo.Program,
		"refund": refundProgram,
		"typescript": `type C = { id: string; name: string }
const ids: string[] = ["c-1", "c-2", "c-3", "c-9"]
const got = await Promise.allSettled(ids.map((id) => tools.shop.getCustomer({ id })))
return got.map((r) => r.status === "fulfilled" ? (r.value as C).name : r.reason.message)`,
	}
	for name, program := range programs {
		t.Run(name, func(t *testing.T) {
			code, direct, errs := codemodeProcess(t, program, "run", "--demo-tools", "--cache-dir", cache, "-")
			if code != exitOK {
				t.Fatalf("direct run: exit %d\n%s\n%s", code, direct, errs)
			}
			dir := filepath.Join(t.TempDir(), "run")
			code, out, errs := codemodeProcess(t, program, "run", "--demo-tools", "--cache-dir", cache, "--state-key-file", key, "--suspend-dir", dir, "-")
			steps := 0
			for code == exitSuspended {
				steps++
				if steps > 20 {
					t.Fatal("more than 20 steps")
				}
				if !strings.Contains(errs, "codemode resume --run") {
					t.Fatalf("no hint on how to continue:\n%s", errs)
				}
				code, out, errs = codemodeProcess(t, "", "resume", "--demo-tools", "--cache-dir", cache, "--state-key-file", key, "--run", "all", dir)
			}
			if code != exitOK || steps == 0 {
				t.Fatalf("after %d steps: exit %d\n%s\n%s", steps, code, out, errs)
			}
			if a, b := withoutDurations(t, direct), withoutDurations(t, out); !reflect.DeepEqual(a, b) {
				t.Fatalf("direct and suspended results differ:\n%s\n%s", direct, out)
			}
			saved, err := os.ReadFile(filepath.Join(dir, resultFile))
			if err != nil || !reflect.DeepEqual(withoutDurations(t, string(saved)), withoutDurations(t, out)) {
				t.Fatalf("result.json: %v\n%s", err, saved)
			}
			if _, err := os.Stat(filepath.Join(dir, stateFile)); err == nil {
				t.Fatal("the state of an ended run was left behind")
			}
		})
	}
}

// TestApprovalAcrossProcesses is the human-approval flow: refunds wait
// for a person, who approves one, refuses one and answers one by hand,
// each in a new process.
func TestApprovalAcrossProcesses(t *testing.T) {
	cache := t.TempDir()
	key := filepath.Join(t.TempDir(), "key")
	dir := filepath.Join(t.TempDir(), "refunds")
	common := []string{"--demo-tools", "--cache-dir", cache, "--state-key-file", key}
	resume := func(args ...string) (int, string, string) {
		return codemodeProcess(t, "", append(append([]string{"resume"}, common...), append(args, dir)...)...)
	}
	code, _, errs := codemodeProcess(t, refundProgram, append(append([]string{"run"}, common...), "--suspend-dir", dir, "-")...)
	if code != exitSuspended {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	// The listing is a read: make it.
	code, out, errs := resume("--run", "0")
	if code != exitSuspended {
		t.Fatalf("resume: exit %d\n%s", code, errs)
	}
	m := decode(t, out)
	pending := m["pending"].([]any)
	if len(pending) != 1 || pending[0].(map[string]any)["name"] != "shop.refundOrder" {
		t.Fatalf("pending %v", pending)
	}
	var p struct {
		ID    int
		Input map[string]any
	}
	b, err := os.ReadFile(filepath.Join(dir, pendingDir, "1.json"))
	if err != nil || json.Unmarshal(b, &p) != nil || p.Input["orderId"] != "o-1001" {
		t.Fatalf("pending file: %v %s", err, b)
	}

	// Mistakes are refused and lose nothing.
	for _, bad := range []struct {
		args []string
		exit int
		want string
	}{
		{nil, exitUsage, "no pending call is answered"},
		{[]string{"--run", "7"}, exitUsage, "call 7 is not pending"},
		{[]string{"--run", "1", "--deny", "1"}, exitUsage, "name the same calls"},
		{[]string{"--run", "all", "--deny", "all"}, exitUsage, "name the same calls"},
		{[]string{"--run", "all", "--deny", "2"}, exitUsage, "name the same calls"},
	} {
		code, _, errs := resume(bad.args...)
		if code != bad.exit || !strings.Contains(errs, bad.want) {
			t.Fatalf("resume %v: exit %d, want %d with %q\n%s", bad.args, code, bad.exit, bad.want, errs)
		}
	}
	code, _, errs = codemodeProcess(t, "", "resume", "--demo-tools=false", "--cache-dir", cache, "--state-key-file", key, "--run", "1", dir)
	if code != exitFailure || !strings.Contains(errs, "another tool tree") {
		t.Fatalf("resume without the run's tools: exit %d\n%s", code, errs)
	}
	otherKey := filepath.Join(t.TempDir(), "other")
	code, _, errs = codemodeProcess(t, "", "resume", "--demo-tools", "--cache-dir", cache, "--state-key-file", otherKey, "--run", "1", dir)
	if code != exitFailure || !strings.Contains(errs, "another --state-key-file") {
		t.Fatalf("resume with another key: exit %d\n%s", code, errs)
	}
	// Rewriting the pending file changes nothing: the call comes from the
	// state.
	forged := bytes.Replace(b, []byte("o-1001"), []byte("o-1006"), 1)
	if err := os.WriteFile(filepath.Join(dir, pendingDir, "1.json"), forged, 0o600); err != nil {
		t.Fatal(err)
	}
	state, _ := os.ReadFile(filepath.Join(dir, stateFile))
	tampered := bytes.Replace(state, []byte("o-1001"), []byte("o-1006"), 1)
	if bytes.Equal(tampered, state) {
		t.Fatal("the state does not hold the order id in the clear")
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs = resume("--run", "1")
	if code != exitFailure || !strings.Contains(errs, "damaged") {
		t.Fatalf("tampered state: exit %d\n%s", code, errs)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), state, 0o600); err != nil {
		t.Fatal(err)
	}

	// Approve the first refund.
	if code, _, errs = resume("--run", "1"); code != exitSuspended {
		t.Fatalf("approve: exit %d\n%s", code, errs)
	}
	// Refuse the second.
	if code, _, errs = resume("--deny", "2", "--deny-message", "over the refund limit"); code != exitSuspended {
		t.Fatalf("deny: exit %d\n%s", code, errs)
	}
	// Answer the third by hand, in the directory made for it.
	hand := `{"output": {"orderId": "o-1004", "refundedCents": 30000, "status": "refunded by hand"}}`
	if err := os.WriteFile(filepath.Join(dir, resultsDir, "3.json"), []byte(hand), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = resume()
	if code != exitOK {
		t.Fatalf("last step: exit %d\n%s\n%s", code, out, errs)
	}
	m = decode(t, out)
	want := `[{"orderId":"o-1001","refundedCents":4599,"status":"refunded"},{"orderId":"o-1003","refused":"tools.shop.refundOrder was denied: over the refund limit"},{"orderId":"o-1004","refundedCents":30000,"status":"refunded by hand"}]`
	if v, _ := json.Marshal(m["value"]); string(v) != want {
		t.Fatalf("value %s\nwant  %s", v, want)
	}
	var outcomes []string
	for _, c := range m["toolCalls"].([]any) {
		outcomes = append(outcomes, c.(map[string]any)["outcome"].(string))
	}
	if strings.Join(outcomes, ",") != "ok,ok,denied,ok" {
		t.Fatalf("audit %v", m["toolCalls"])
	}
	if code, _, errs = resume("--run", "all"); code != exitUsage || !strings.Contains(errs, "has ended") {
		t.Fatalf("resume of an ended run: exit %d\n%s", code, errs)
	}
	code, _, errs = codemodeProcess(t, "return 1", append(append([]string{"run"}, common...), "--suspend-dir", dir, "-")...)
	if code != exitUsage || !strings.Contains(errs, "already holds a run") {
		t.Fatalf("run into a used directory: exit %d\n%s", code, errs)
	}
}

// TestPolicyWithSuspendDir: with --policy only the asked calls wait; the
// reads run at once, and resume keeps applying the policy.
func TestPolicyWithSuspendDir(t *testing.T) {
	cache := t.TempDir()
	key := filepath.Join(t.TempDir(), "key")
	dir := filepath.Join(t.TempDir(), "refunds")
	common := []string{"--demo-tools", "--cache-dir", cache, "--state-key-file", key, "--policy", "readonly=allow,default=ask"}
	code, out, errs := codemodeProcess(t, refundProgram, append(append([]string{"run"}, common...), "--suspend-dir", dir, "-")...)
	if code != exitSuspended {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	pending := decode(t, out)["pending"].([]any)
	first := pending[0].(map[string]any)
	if len(pending) != 1 || first["name"] != "shop.refundOrder" || first["reason"] != "allow shop.refundOrder?" {
		t.Fatalf("pending %v", pending)
	}
	steps := 0
	for code == exitSuspended {
		if steps++; steps > 5 {
			t.Fatal("too many steps")
		}
		code, out, errs = codemodeProcess(t, "", append(append([]string{"resume"}, common...), "--run", "all", dir)...)
	}
	m := decode(t, out)
	if code != exitOK || len(m["toolCalls"].([]any)) != 4 || steps != 3 {
		t.Fatalf("exit %d after %d steps\n%s\n%s", code, steps, out, errs)
	}
}

func TestStateKeyFile(t *testing.T) {
	dir := t.TempDir()
	s := suspendFlags{keyFile: filepath.Join(dir, "sub", "key")}
	k1, err := s.key()
	if err != nil || len(k1) != 32 {
		t.Fatalf("new key: %v %d", err, len(k1))
	}
	if fi, err := os.Stat(s.keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", err, fi.Mode())
	}
	k2, err := s.key()
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatal("the key changed between reads")
	}
	short := suspendFlags{keyFile: filepath.Join(dir, "short")}
	_ = os.WriteFile(short.keyFile, []byte("too short"), 0o600)
	if _, err := short.key(); err == nil || !strings.Contains(err.Error(), "fewer than the 32") {
		t.Fatalf("short key: %v", err)
	}
}

// payService is a loopback HTTP service with one side effect, POST /pay,
// described by an OpenAPI document: what codemode processes do to it is
// counted here, outside them.
func payService(t *testing.T) (spec string, posts *atomic.Int64, base string) {
	t.Helper()
	posts = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/pay" {
			n := posts.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"payment": %d}`, n)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	spec = filepath.Join(t.TempDir(), "bank.yaml")
	doc := `openapi: 3.1.0
info: {title: bank, version: "1"}
paths:
  /pay:
    post:
      operationId: pay
      requestBody:
        content:
          application/json:
            schema: {type: object, properties: {to: {type: string}}}
      responses:
        "200":
          description: paid
          content:
            application/json:
              schema: {type: object}
`
	if err := os.WriteFile(spec, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return spec, posts, srv.URL
}

// TestSuspendDirStepsRunOnce attacks codemode resume as a careless or
// hostile operator would: two resumes of one directory at once, an old
// state copied back, a state replayed after the run ended, links and
// oversized answers in the directory, and a resume after the deadline.
// The service counts what really happened.
func TestSuspendDirStepsRunOnce(t *testing.T) {
	spec, posts, base := payService(t)
	cache := t.TempDir()
	key := filepath.Join(t.TempDir(), "key")
	runStore := filepath.Join(t.TempDir(), "runs")
	common := []string{"--openapi", spec + "=bank", "--base-url", base, "--cache-dir", cache, "--state-key-file", key, "--run-store", runStore}
	const program = `const a = await tools.bank.pay({ to: "a" }); const b = await tools.bank.pay({ to: "b" }); return [a, b]`
	start := func(extra ...string) string {
		dir := filepath.Join(t.TempDir(), "run")
		code, _, errs := codemodeProcess(t, program, append(append(append([]string{"run"}, common...), extra...), "--suspend-dir", dir, "-")...)
		if code != exitSuspended {
			t.Fatalf("run: exit %d\n%s", code, errs)
		}
		return dir
	}
	resume := func(dir string, args ...string) (int, string, string) {
		return codemodeProcess(t, "", append(append(append([]string{"resume"}, common...), args...), dir)...)
	}

	// Two resumes at once: one makes the call, the other is refused.
	dir := start()
	first, _ := os.ReadFile(filepath.Join(dir, stateFile))
	type outcome struct {
		code int
		errs string
	}
	results := make(chan outcome, 2)
	for range 2 {
		go func() {
			code, _, errs := resume(dir, "--run", "0")
			results <- outcome{code, errs}
		}()
	}
	var codes []int
	for range 2 {
		o := <-results
		codes = append(codes, o.code)
		// The loser is refused: it took the same step (step was taken),
		// or it read the state the winner had already moved on, where
		// call 0 is done (not pending). Either way it pays nothing.
		if o.code != exitSuspended && !strings.Contains(o.errs, "step was taken") && !strings.Contains(o.errs, "call 0 is not pending") {
			t.Fatalf("a racing resume: exit %d\n%s", o.code, o.errs)
		}
	}
	if posts.Load() != 1 {
		t.Fatalf("two resumes at once made %d payments (exits %v)", posts.Load(), codes)
	}
	// The old state copied back: refused, no payment.
	second, _ := os.ReadFile(filepath.Join(dir, stateFile))
	if err := os.WriteFile(filepath.Join(dir, stateFile), first, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := resume(dir, "--run", "0"); code != exitFailure || !strings.Contains(errs, "is at step 2, and this state is of step 1") || posts.Load() != 1 {
		t.Fatalf("old state: exit %d, %d payments\n%s", code, posts.Load(), errs)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), second, 0o600); err != nil {
		t.Fatal(err)
	}
	// A link in the directory, an answer too large: refused before
	// anything is taken.
	elsewhere := t.TempDir()
	victim := filepath.Join(elsewhere, "1.json")
	if err := os.WriteFile(victim, []byte(`{"output": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(filepath.Join(dir, resultsDir))
	if err := os.Symlink(elsewhere, filepath.Join(dir, resultsDir)); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := resume(dir); code != exitUsage || !strings.Contains(errs, "symbolic link") {
		t.Fatalf("linked results: exit %d\n%s", code, errs)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the file behind the link was touched: %v", err)
	}
	_ = os.Remove(filepath.Join(dir, resultsDir))
	_ = os.Mkdir(filepath.Join(dir, resultsDir), 0o700)
	big := filepath.Join(dir, resultsDir, "1.json")
	f, _ := os.Create(big)
	_ = f.Truncate(maxAnswerBytes + 1)
	f.Close()
	if code, _, errs := resume(dir); code != exitUsage || !strings.Contains(errs, "an answer may have") {
		t.Fatalf("oversized answer: exit %d\n%s", code, errs)
	}
	_ = os.Remove(big)
	// The last step, then the first and second states replayed after the
	// end: refused, no payment.
	if code, out, errs := resume(dir, "--run", "1"); code != exitOK || !strings.Contains(out, `"payment":2`) {
		t.Fatalf("last step: exit %d\n%s\n%s", code, out, errs)
	}
	for _, st := range [][]byte{first, second} {
		if err := os.WriteFile(filepath.Join(dir, stateFile), st, 0o600); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(filepath.Join(dir, resultFile))
		if code, _, errs := resume(dir, "--run", "all"); code != exitFailure || !strings.Contains(errs, "step was taken") || posts.Load() != 2 {
			t.Fatalf("replay after the end: exit %d, %d payments\n%s", code, posts.Load(), errs)
		}
	}

	// Out of time while suspended: resuming makes no call.
	dir = start("--timeout", "500ms", "--timeout-includes-suspended")
	time.Sleep(700 * time.Millisecond)
	code, out, errs := resume(dir, "--run", "0")
	if code != exitFailure || !strings.Contains(out, "TimeoutExceeded") || posts.Load() != 2 {
		t.Fatalf("after the deadline: exit %d, %d payments\n%s\n%s", code, posts.Load(), out, errs)
	}
	if !strings.Contains(out, `"outcome":"cancelled"`) {
		t.Fatalf("a call not made is not reported as such:\n%s", out)
	}
}

// nextStep finds the first "codemode resume ..." command the output
// suggests, as its arguments.
func nextStep(t *testing.T, out string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, "codemode resume "); i >= 0 {
			cmd, _, _ := strings.Cut(line[i:], "  ")
			return strings.Fields(cmd)[1:]
		}
	}
	t.Fatalf("no codemode resume command in:\n%s", out)
	return nil
}

// TestPastedNextStep: the command a suspended run prints is the one to
// paste. The suspend directory remembers the run's tool sources (an
// OpenAPI document with its credential variable, the demo tools), its
// policy and its state key, so each printed resume works as printed
// until the run ends; credentials
// are recorded by name only. A flag given to resume replaces the
// recorded one, and a changed record is refused.
func TestPastedNextStep(t *testing.T) {
	cache := t.TempDir()
	key := filepath.Join(t.TempDir(), "key")
	work := t.TempDir()
	spec, err := filepath.Abs(filepath.Join("..", "demo", "shop.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "shop.yaml"), read(t, spec), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	t.Setenv("SHOP_TEST_TOKEN", "tok-secret-0123456789")
	dir := "refunds" // relative, as a person types it
	code, out, errs := codemodeProcess(t, refundProgram, "run", "--demo-tools", "--cache-dir", cache, "--state-key-file", key,
		"--openapi", "shop.yaml=api", "--bearer-env", "SHOP_TEST_TOKEN", "--base-url", "http://127.0.0.1:1",
		"--policy", "default=ask", "--suspend-dir", dir, "-")
	if code != exitSuspended {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	saved := string(read(t, filepath.Join(dir, flagsFile)))
	if strings.Contains(saved, "tok-secret") || !strings.Contains(saved, "SHOP_TEST_TOKEN") || !strings.Contains(saved, filepath.Join(work, "shop.yaml")+"=api") {
		t.Errorf("got %s:\n%s\nwant the variable's name, not its value, and absolute paths", flagsFile, saved)
	}
	// Each printed step, run exactly as printed. The paths it needs are
	// absolute in the record, so it would work from elsewhere too.
	for steps := 0; code == exitSuspended; steps++ {
		if steps > 10 {
			t.Fatal("more than 10 steps")
		}
		code, out, errs = codemodeProcess(t, "", nextStep(t, errs)...)
	}
	if code != exitOK {
		t.Fatalf("pasted resume: exit %d\n%s\n%s", code, out, errs)
	}
	if v := decode(t, out); v["ok"] != true {
		t.Fatalf("got %s", out)
	}

	abs := filepath.Join(work, dir)
	t.Chdir(t.TempDir())
	// A flag given again replaces the recorded one: without the demo
	// tools the tool tree differs, and resume says so.
	code, out, errs = codemodeProcess(t, refundProgram, "run", "--demo-tools", "--cache-dir", cache, "--state-key-file", key, "--suspend-dir", abs+"2", "-")
	if code != exitSuspended {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs = codemodeProcess(t, "", "resume", "--demo-tools=false", "--run", "0", abs+"2"); code != exitFailure || !strings.Contains(errs, "tool") {
		t.Errorf("got exit %d, %s; want the other tool tree refused", code, errs)
	}
	// A record changed by someone who can write the directory is refused.
	name := filepath.Join(abs+"2", flagsFile)
	changed := strings.Replace(string(read(t, name)), `"demo-tools"`, `"config"`, 1)
	if err := os.WriteFile(name, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs = codemodeProcess(t, "", "resume", "--run", "0", abs+"2"); code != exitFailure || !strings.Contains(errs, "was changed") {
		t.Errorf("got exit %d, %s; want the changed record refused", code, errs)
	}
}
