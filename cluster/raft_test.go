package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A test binary started with envServerDir is an embedded server of a
// three-server cluster (see TestMain).
const (
	envServerDir    = "CODEMODE_TEST_SERVER_DIR"
	envServerListen = "CODEMODE_TEST_SERVER_LISTEN"
	envServerRoute  = "CODEMODE_TEST_SERVER_ROUTE"
	envServerRoutes = "CODEMODE_TEST_SERVER_ROUTES"
	envServerToken  = "CODEMODE_TEST_SERVER_TOKEN"
)

func serverProcess() int {
	_, err := Open(context.Background(), Config{
		DataDir: os.Getenv(envServerDir), Listen: os.Getenv(envServerListen), Token: os.Getenv(envServerToken),
		ClusterName: "test", ClusterListen: os.Getenv(envServerRoute), Routes: strings.Split(os.Getenv(envServerRoutes), ","),
		Replicas: 3, AckWait: time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	return 0
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Three embedded servers clustered on loopback keep every stream and
// bucket at three replicas. The leader of the run records is killed with
// SIGKILL while runs make side-effecting calls: every run submitted ends,
// no acknowledged write is lost, and no charge is made twice.
func TestStreamLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server cluster")
	}
	const secret = "test-token-0123456789abcdef"
	var client, route [3]int
	for i := range 3 {
		client[i], route[i] = freePort(t), freePort(t)
	}
	servers := map[string]*exec.Cmd{} // server name -> process
	var urls []string
	for i := range 3 {
		dir := filepath.Join(t.TempDir(), "s"+strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		name, err := token(filepath.Join(dir, "name")) // the server's name, before it starts
		if err != nil {
			t.Fatal(err)
		}
		var routes []string
		for j := range 3 {
			if j != i {
				routes = append(routes, "127.0.0.1:"+strconv.Itoa(route[j]))
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envServerDir+"="+dir, envServerListen+"=127.0.0.1:"+strconv.Itoa(client[i]),
			envServerRoute+"=127.0.0.1:"+strconv.Itoa(route[i]), envServerRoutes+"="+strings.Join(routes, ","), envServerToken+"="+secret)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		servers["codemode-"+name[:12]] = cmd
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(client[i]))
	}
	for i := range 3 {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(client[i]))
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("server %d never listened", i)
			}
		}
	}
	cfg := Config{URL: strings.Join(urls, ","), Options: []nats.Option{nats.Token(secret)}, Replicas: 3, AckWait: time.Second}
	formed := time.Now()
	n := openNode(t, cfg)
	t.Logf("the cluster answered %v after its servers listened", time.Since(formed).Round(time.Millisecond))
	var fx effects
	startWorker(t, openNode(t, cfg), shopTools(&fx, nil))
	startWorker(t, openNode(t, cfg), shopTools(&fx, nil))
	rt := front(t, shopTools(nil, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const runs = 30
	// A failover longer than AckWait hands runs to the other worker, so a
	// call may end in doubt (reported, never repeated): the program
	// records what it was told.
	program := `const out = [];
		for (let i = 0; i < 4; i++) {
			try { out.push("ok " + (await tools.shop.charge({ order: "o" + i })).key); }
			catch (e) { out.push("err " + e.message); }
		}
		return out`
	var ids []string
	submit := func(k int) {
		for range k {
			id, err := n.Submit(ctx, rt, program)
			if err != nil {
				t.Logf("submit refused (not acknowledged, so not a lost write): %v", err)
				continue
			}
			ids = append(ids, id)
		}
	}
	submit(runs / 2)
	runsInfo, err := n.runs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := kvLeader(ctx, t, n)
	cmd := servers[leader]
	if cmd == nil {
		t.Fatalf("the leader %q of %s is not one of the servers (%v)", leader, runsInfo.Bucket(), servers)
	}
	_ = cmd.Process.Kill()
	killed := time.Now()
	submit(runs / 2)
	var seen []string
	doubts := 0
	for _, id := range ids {
		res, _, err := n.Wait(ctx, id)
		if err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		var out []string
		if !res.OK || json.Unmarshal(res.Value, &out) != nil || len(out) != 4 {
			t.Fatalf("run %s: %s %+v", id, res.Value, res.Error)
		}
		for _, line := range out {
			switch {
			case strings.HasPrefix(line, "ok "):
				seen = append(seen, strings.TrimPrefix(line, "ok "))
			case strings.Contains(line, "is unknown"):
				doubts++
			default:
				t.Fatalf("run %s: %q", id, line)
			}
		}
	}
	if after := kvLeader(ctx, t, n); after == leader || after == "" {
		t.Fatalf("no new leader: %q", after)
	}
	fx.mu.Lock()
	defer fx.mu.Unlock()
	for key, c := range fx.keys {
		if c > 1 {
			t.Errorf("charge %s made %d times", key, c)
		}
	}
	for _, key := range seen {
		if fx.keys[key] != 1 {
			t.Errorf("the program saw charge %s succeed; it was made %d times", key, fx.keys[key])
		}
	}
	t.Logf("%d runs acknowledged and finished (%d calls in doubt, reported); the killed leader was replaced, last run done %v after the kill",
		len(ids), doubts, time.Since(killed).Round(time.Millisecond))
}

// kvLeader is the server leading the run records' stream.
func kvLeader(ctx context.Context, t *testing.T, n *Node) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		s, err := n.js.Stream(ctx, "KV_"+runsBucket)
		if err != nil {
			continue
		}
		info, err := s.Info(ctx)
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			return info.Cluster.Leader
		}
	}
	return ""
}
