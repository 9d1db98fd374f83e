package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/nats-io/nats.go"
)

// A test binary started with these variables is a worker process (see
// TestMain): it joins the cluster at the URL and runs ledgerTools, which
// append each call's idempotency key to the effects file.
const (
	envWorkerURL   = "CODEMODE_TEST_WORKER_URL"
	envWorkerToken = "CODEMODE_TEST_WORKER_TOKEN"
	envEffects     = "CODEMODE_TEST_EFFECTS"
	envFrontURL    = "CODEMODE_TEST_FRONT_URL"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envWorkerURL); url != "" {
		os.Exit(workerProcess(url))
	}
	if os.Getenv(envServerDir) != "" {
		os.Exit(serverProcess())
	}
	if url := os.Getenv(envFrontURL); url != "" {
		os.Exit(frontProcess(url))
	}
	os.Exit(m.Run())
}

// ledgerTools append "<kind> <key>" lines to the file at path, one
// write(2) each, with pauses either side so that a kill lands in the
// middle of calls.
func ledgerTools(path string) codemode.Tools {
	effect := func(kind string) func(ctx context.Context, in json.RawMessage) (any, error) {
		return func(ctx context.Context, in json.RawMessage) (any, error) {
			time.Sleep(time.Duration(rand.IntN(8)) * time.Millisecond)
			key, _ := IdempotencyKey(ctx)
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
			if err != nil {
				return nil, err
			}
			_, err = f.WriteString(kind + " " + key + "\n")
			f.Close()
			if err != nil {
				return nil, err
			}
			// Longer after than before: a kill then often finds the call
			// made and not yet recorded, the case that must not repeat.
			time.Sleep(time.Duration(rand.IntN(25)) * time.Millisecond)
			return key, nil
		}
	}
	return codemode.Tools{"ledger": codemode.Tools{
		// crash ends the worker's process: a poison job. It reads
		// nothing, so a takeover calls it again.
		"crash": codemode.Tool{Description: "Ends the worker.", Input: orderSchema,
			Annotations: &codemode.Annotations{ReadOnly: true},
			Run: func(ctx context.Context, in json.RawMessage) (any, error) {
				os.Exit(3)
				return nil, nil
			}},
		"charge": codemode.Tool{Description: "Charges.", Input: orderSchema, Run: effect("charge")},
		"refund": codemode.Tool{Description: "Refunds.", Input: orderSchema, Run: effect("refund"),
			Annotations: &codemode.Annotations{Idempotent: true}},
	}}
}

func workerProcess(url string) int {
	n, err := Open(context.Background(), Config{URL: url, Options: []nats.Option{nats.Token(os.Getenv(envWorkerToken))},
		AckWait: time.Second, MaxDeliver: poisonDeliveries, Name: fmt.Sprintf("worker-%d", os.Getpid())})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w, err := NewWorker(n, codemode.Options{CacheDir: engineCache, Tools: ledgerTools(os.Getenv(envEffects)), StateKey: testKey, Timeout: time.Minute},
		WorkerOptions{MaxRuns: 8})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	_ = w.Run(ctx)
	n.Close()
	return 0
}

type procs struct {
	t       *testing.T
	url     string
	token   string
	effects string
	mu      sync.Mutex
	live    []*proc
}

// proc is a worker process; done is closed when it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *procs) start() {
	p.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorkerURL+"="+p.url, envWorkerToken+"="+p.token, envEffects+"="+p.effects)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		p.t.Error(err)
		return
	}
	pr := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(pr.done) }()
	p.mu.Lock()
	p.live = append(p.live, pr)
	p.mu.Unlock()
}

// kill sends SIGKILL to the worker process named owner (a record's
// Owner), or to the i-th live one when none is, and forgets it.
func (p *procs) kill(owner string, i int) {
	p.mu.Lock()
	at := i % len(p.live)
	for j, pr := range p.live {
		if owner == fmt.Sprintf("worker-%d", pr.cmd.Process.Pid) {
			at = j
		}
	}
	pr := p.live[at]
	p.live = append(p.live[:at], p.live[at+1:]...)
	p.mu.Unlock()
	_ = pr.cmd.Process.Kill()
	<-pr.done
}

// pause stops the worker process named owner (or the i-th) with SIGSTOP
// for d, longer than AckWait, then lets it go on: meanwhile its runs are
// taken over, and what it writes when it wakes must be refused.
func (p *procs) pause(owner string, i int, d time.Duration) {
	p.mu.Lock()
	cmd := p.live[i%len(p.live)].cmd
	for _, pr := range p.live {
		if owner == fmt.Sprintf("worker-%d", pr.cmd.Process.Pid) {
			cmd = pr.cmd
		}
	}
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(d)
	_ = cmd.Process.Signal(syscall.SIGCONT)
}

// busy returns the owner of a run that is running, waiting up to 5s for
// one.
func busy(ctx context.Context, n *Node, ids []string, seed *rand.Rand) string {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, k := range seed.Perm(len(ids)) {
			if rec, _, err := n.record(ctx, ids[k]); err == nil && rec.Status == running {
				return rec.Owner
			}
		}
	}
	return ""
}

func (p *procs) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.live {
		_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, pr := range p.live {
		select {
		case <-pr.done:
		case <-time.After(10 * time.Second):
			_ = pr.cmd.Process.Kill()
			<-pr.done
		}
	}
	p.live = nil
}

// poisonDeliveries is MaxDeliver in the tests with worker processes.
const poisonDeliveries = 3

// A job whose program ends every worker that runs it is given up after
// MaxDeliver attempts: it moves to the dead-letter stream, and the run
// ends with a result that says so.
func TestPoisonJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes that crash")
	}
	n := openNode(t, Config{AckWait: time.Second, MaxDeliver: poisonDeliveries})
	p := &procs{t: t, url: n.URL(), token: n.Token(), effects: filepath.Join(t.TempDir(), "effects")}
	t.Cleanup(p.stopAll)
	// A supervisor: each worker that exits is replaced.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			p.mu.Lock()
			live := p.live[:0]
			for _, pr := range p.live {
				if !pr.exited() {
					live = append(live, pr)
				}
			}
			p.live = live
			missing := 2 - len(live)
			p.mu.Unlock()
			for range missing {
				p.start()
			}
		}
	}()
	rt := front(t, ledgerTools(p.effects))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := n.Submit(ctx, rt, `await tools.ledger.crash({ order: "x" }); return "unreachable"`)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := n.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.Error == nil || !strings.Contains(res.Error.Message, fmt.Sprintf("given up after %d attempts", poisonDeliveries)) {
		t.Fatalf("result %+v", res)
	}
	dlq, err := n.js.Stream(ctx, dlqStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dlq.Info(ctx)
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("dead letters: %+v %v", info.State, err)
	}
	// The run's result is recorded before its job is removed (so a worker
	// that dies in between leaves a job to end it again, not a run
	// without an end): the queue empties just after Wait returns.
	for {
		winfo, err := n.work.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if winfo.State.Msgs == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the work queue still holds %+v", winfo.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Worker processes are killed with SIGKILL at seeded times (and one is
// stopped past AckWait, then continued) while runs make side-effecting
// calls: every run ends, no call of a tool that is not
// idempotent is made twice, every call the program saw succeed happened
// exactly once, and the calls in doubt are few and reported as such.
func TestKillWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills worker processes")
	}
	n := openNode(t, Config{AckWait: time.Second})
	p := &procs{t: t, url: n.URL(), token: n.Token(), effects: filepath.Join(t.TempDir(), "effects")}
	for range 3 {
		p.start()
	}
	t.Cleanup(p.stopAll)
	rt := front(t, ledgerTools(p.effects))
	const runs, calls, kills = 40, 6, 5
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	program := fmt.Sprintf(`
		const out = [];
		for (let i = 0; i < %d; i++) {
			try { out.push("ok " + await tools.ledger.charge({ order: "o" + i })); }
			catch (e) { out.push("err " + e.message); }
		}
		out.push("ok " + await tools.ledger.refund({ order: "r" }));
		return out;`, calls)
	ids := make([]string, runs)
	for i := range ids {
		id, err := n.Submit(ctx, rt, program)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	seed := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	for k := range kills {
		time.Sleep(time.Duration(50+seed.IntN(200)) * time.Millisecond)
		p.kill(busy(ctx, n, ids, seed), seed.IntN(3))
		t.Logf("kill %d", k+1)
		p.start()
		if k == 1 {
			// A partition rather than a death: the stalled worker wakes
			// after its runs were taken over.
			p.pause(busy(ctx, n, ids, seed), seed.IntN(3), 2500*time.Millisecond)
			t.Log("paused one")
		}
	}
	seen := map[string]int{} // key -> results the programs saw succeed
	doubts, takeovers := 0, 0
	for _, id := range ids {
		res, _, err := n.Wait(ctx, id)
		if err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		rec, _, err := n.record(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		takeovers += rec.Takeovers
		if !res.OK {
			t.Fatalf("run %s failed: %+v", id, res.Error)
		}
		var out []string
		if err := json.Unmarshal(res.Value, &out); err != nil || len(out) != calls+1 {
			t.Fatalf("run %s: %s", id, res.Value)
		}
		for _, line := range out {
			switch {
			case strings.HasPrefix(line, "ok "):
				seen[strings.TrimPrefix(line, "ok ")]++
			case strings.Contains(line, "is unknown"):
				doubts++
			default:
				t.Fatalf("run %s: %q", id, line)
			}
		}
	}
	made := map[string]int{}
	kinds := map[string]string{}
	f, err := os.Open(p.effects)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kind, key, _ := strings.Cut(sc.Text(), " ")
		made[key]++
		kinds[key] = kind
	}
	for key, c := range made {
		if c > 1 && kinds[key] == "charge" {
			t.Errorf("charge %s was made %d times", key, c)
		}
	}
	for key, c := range seen {
		if c != 1 || made[key] == 0 {
			t.Errorf("the program saw %s succeed %d times; it was made %d times", key, c, made[key])
		}
	}
	// A kill leaves at most the calls its worker had under way in doubt.
	if doubts > kills*8 {
		t.Errorf("%d calls in doubt after %d kills", doubts, kills)
	}
	if takeovers == 0 {
		t.Error("no run was taken over: the kills missed every run, so nothing was tested")
	}
	t.Logf("%d runs, %d calls made, %d in doubt, %d takeovers after %d kills", runs, len(made), doubts, takeovers, kills)
}

// frontProcess submits two runs — one that makes a charge, one whose
// charge its worker's policy asks about — prints their ids (and, once it
// has asked, the question) and waits to be killed.
func frontProcess(url string) int {
	n, err := Open(context.Background(), Config{URL: url, Options: []nats.Option{nats.Token(os.Getenv(envWorkerToken))}, Front: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rt, err := codemode.New(codemode.Options{CacheDir: engineCache, Tools: shopTools(nil, nil), StateKey: testKey})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	plain, err := n.Submit(ctx, rt, `return (await tools.shop.refund({ order: "p" })).refunded`)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	asking, err := n.Submit(ctx, rt, chargeProgram)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("runs %s %s\n", plain, asking)
	_, asked, err := n.Wait(ctx, asking)
	if err != nil || asked == nil {
		fmt.Fprintln(os.Stderr, "no question:", err)
		return 1
	}
	fmt.Printf("asked %d %d\n", asked.Step, asked.Calls[0].Index)
	select {} // until killed
}

// A front killed with SIGKILL after it submitted its runs and its run
// asked a question: another front's Wait returns the first run's result,
// sees the question, answers it, and gets the second run's result; the
// charge is made once.
func TestFrontKilled(t *testing.T) {
	n := openNode(t, Config{})
	var fx effects
	startAskingWorker(t, n, &fx)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envFrontURL+"="+n.URL(), envWorkerToken+"="+n.Token())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	var plain, asking string
	var step, index int
	for lines.Scan() {
		if _, err := fmt.Sscanf(lines.Text(), "runs %s %s", &plain, &asking); err == nil {
			continue
		}
		if _, err := fmt.Sscanf(lines.Text(), "asked %d %d", &step, &index); err == nil {
			break
		}
	}
	if asking == "" {
		t.Fatal("the front process asked nothing")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, _, err := n.Wait(ctx, plain)
	if err != nil || !res.OK || string(res.Value) != "true" {
		t.Fatalf("the killed front's first run: %+v %v", res, err)
	}
	_, asked, err := n.Wait(ctx, asking)
	if err != nil || asked == nil || asked.Step != step || asked.Calls[0].Index != index {
		t.Fatalf("the killed front's question: %+v %v", asked, err)
	}
	if err := n.Answer(ctx, asking, step, map[int]codemode.Decision{index: {Verdict: codemode.Allow}}); err != nil {
		t.Fatal(err)
	}
	res, _, err = n.Wait(ctx, asking)
	if err != nil || !res.OK || string(res.Value) != "true" {
		t.Fatalf("the answered run: %+v %v", res, err)
	}
	charges := 0
	fx.mu.Lock()
	for k, c := range fx.keys {
		if strings.HasPrefix(k, asking+"/") {
			charges += c
		}
	}
	fx.mu.Unlock()
	if charges != 1 {
		t.Fatalf("%d charges for the answered run", charges)
	}
}
