package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config says how a process joins the cluster.
type Config struct {
	// URL is an existing NATS server or cluster to join (with Options for
	// its credentials and TLS). Empty starts an embedded nats-server with
	// JetStream in this process, keeping its data in DataDir.
	URL     string
	Options []nats.Option

	// DataDir is where an embedded server keeps its streams, and its
	// client token (token, mode 0600). Required for an embedded server: a
	// temporary directory would lose every parked run with the process.
	DataDir string
	// Listen is the embedded server's client address; empty means
	// 127.0.0.1 on a free port (so does port 0). Another process joins
	// with Node.URL and the token. A non-loopback address is refused
	// unless TLS is set: a token sent in the clear is not for a network.
	Listen string
	// TLS, when set, is the embedded server's TLS for its clients (its
	// certificate; clients are not asked for one, the token is their
	// credential): every client but this process's own connects over
	// TLS, and Listen may be an address other machines reach.
	TLS *tls.Config

	// Name names this process in run records and logs; empty means
	// host:pid.
	Name string

	// Token is the embedded server's client token, and the password of
	// its routes; empty means the one kept in DataDir (made on first
	// use). Embedded servers that cluster need the same token.
	Token string
	// ClusterName, ClusterListen and Routes cluster embedded servers:
	// each listens for routes at ClusterListen (host:port) and dials the
	// others' (Routes); with Replicas 3 every stream and bucket survives
	// one server. Loopback only, like Listen: routes have a password and
	// no TLS (span machines with a NATS cluster of your own).
	ClusterName   string
	ClusterListen string
	Routes        []string

	// Replicas is how many copies of each stream and bucket the servers
	// keep: 1 on one server, 3 in a cluster. Zero means 1.
	Replicas int
	// AckWait is how long a worker may be silent before its run is given
	// to another (a running worker reports progress every AckWait/3).
	// Zero means 10 s.
	AckWait time.Duration
	// MaxDeliver is how many times a job is handed out before it is given
	// up as poison and moved to the dead-letter stream. Zero means 5.
	MaxDeliver int
	// RecordTTL is how long a run's record (its result, or its parked
	// state) is kept after its last change. Zero means 7 days.
	RecordTTL time.Duration
	// AnswerWithin is how long a parked run's questions wait for an
	// answer: past it, they are denied (by a message the servers
	// schedule, so no process has to stay up for it) and the run goes on.
	// Zero means 24 hours; it is capped at RecordTTL.
	AnswerWithin time.Duration
	// Front says this process serves requests (codemode serve): it is
	// listed by Nodes as a front. A process running a Worker is listed
	// as a worker either way.
	Front bool

	// CellYieldBytes is how many bytes of console lines a cell prints
	// before WaitCell returns with them. Zero means
	// codemode.DefaultCellYieldBytes.
	CellYieldBytes int
}

// Names of the streams and buckets (see RATIONALE.md, "Why NATS
// JetStream for the cluster?").
const (
	workStream  = "CM_WORK"
	dlqStream   = "CM_DLQ"
	logsStream  = "CM_LOGS"
	timerStream = "CM_TIMERS"
	timers      = "timers"
	runsBucket  = "CM_RUNS"
	callsBucket = "CM_CALLS"
	stepsBucket = "CM_STEPS"
	valsBucket  = "CM_VALUES"
	consumer    = "workers"

	workSubject = "cm.work.run"
	dlqSubject  = "cm.dlq.run"
	dueSubject  = "cm.timer.due"
)

// Node is this process's connection to the cluster: to an embedded
// server it started, or to an existing NATS.
type Node struct {
	cfg  Config
	srv  embedded // nil when joined
	url  string
	tok  string
	nc   *nats.Conn
	js   jetstream.JetStream
	runs bkv
	led  bkv
	stp  bkv
	vals bkv
	work jetstream.Stream
	logs jetstream.Stream
	tmrs jetstream.Stream

	nodes   bkv
	started time.Time
	stop    context.CancelFunc // ends announce
	done    chan struct{}      // closed when announce has returned
	changed chan struct{}
	mu      sync.Mutex
	workers []*Worker
}

// Open joins the cluster Config describes, starting an embedded server
// when it names none, and makes the streams and buckets runs need.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = 10 * time.Second
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = 5
	}
	if cfg.RecordTTL == 0 {
		cfg.RecordTTL = 7 * 24 * time.Hour
	}
	if cfg.AnswerWithin == 0 {
		cfg.AnswerWithin = 24 * time.Hour
	}
	cfg.AnswerWithin = min(cfg.AnswerWithin, cfg.RecordTTL)
	if cfg.CellYieldBytes <= 0 {
		cfg.CellYieldBytes = codemode.DefaultCellYieldBytes
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = host + ":" + strconv.Itoa(os.Getpid())
	}
	n := &Node{cfg: cfg, started: time.Now().UTC(), changed: make(chan struct{}, 1), done: make(chan struct{})}
	opts := append([]nats.Option{nats.Name("codemode " + cfg.Name), nats.MaxReconnects(-1)}, cfg.Options...)
	if cfg.URL == "" {
		if err := n.embed(); err != nil {
			return nil, err
		}
		opts = append(opts, nats.Token(n.tok), nats.InProcessServer(n.srv))
	} else {
		n.url = cfg.URL
	}
	dial := n.url
	if n.srv != nil {
		// In process, with no TLS between the two (ClientURL says tls://
		// when the server has TLS).
		_, addr, _ := strings.Cut(n.srv.ClientURL(), "://")
		dial = "nats://" + addr
	}
	nc, err := nats.Connect(dial, opts...)
	if err != nil {
		n.shutdown()
		return nil, fmt.Errorf("cluster: connecting to NATS at %s: %w", n.url, err)
	}
	n.nc = nc
	// A clustered JetStream answers only once its servers have elected a
	// leader: a fresh cluster of three took 20 to 60 s on a busy 2-core
	// machine.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := n.setup(ctx)
		if err == nil {
			actx, stop := context.WithCancel(context.Background())
			n.stop = stop
			go func() { defer close(n.done); n.announce(actx) }()
			return n, nil
		}
		if errors.Is(err, errTooOld) || time.Now().After(deadline) || ctx.Err() != nil {
			n.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// embed starts the embedded server.
func (n *Node) embed() error {
	if !EmbeddedServer {
		return errNoEmbedded
	}
	if n.cfg.DataDir == "" {
		return errors.New("cluster: an embedded NATS server needs a data directory (Config.DataDir, --data)")
	}
	host, port, err := loopback("listen", n.cfg.Listen, "127.0.0.1", -1)
	if err != nil && n.cfg.TLS != nil {
		host, port, err = hostPort("listen", n.cfg.Listen)
	}
	if err != nil {
		return err
	}
	if port == 0 {
		port = -1 // a free one, not NATS's default
	}
	if err := os.MkdirAll(n.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("cluster: data directory: %w", err)
	}
	tok := n.cfg.Token
	if tok == "" {
		if tok, err = token(filepath.Join(n.cfg.DataDir, "token")); err != nil {
			return err
		}
	}
	// A JetStream server's name is its identity among its peers: the
	// same for the same data, whatever the process.
	name, err := token(filepath.Join(n.cfg.DataDir, "name"))
	if err != nil {
		return err
	}
	o := serverOptions{name: "codemode-" + name[:12], host: host, port: port, token: tok,
		storeDir: filepath.Join(n.cfg.DataDir, "jetstream"), tls: n.cfg.TLS}
	if n.cfg.ClusterListen != "" {
		o.clusterName = cmp.Or(n.cfg.ClusterName, "codemode")
		if o.clusterHost, o.clusterPort, err = loopback("cluster listen", n.cfg.ClusterListen, "", 0); err != nil {
			return err
		}
		for _, r := range n.cfg.Routes {
			rhost, rport, err := loopback("route", r, "", 0)
			if err != nil {
				return err
			}
			o.routes = append(o.routes, &url.URL{Scheme: "nats-route", User: url.UserPassword("codemode", tok),
				Host: net.JoinHostPort(rhost, strconv.Itoa(rport))})
		}
	}
	srv, err := startServer(o)
	if err != nil {
		return err
	}
	n.srv, n.tok, n.url = srv, tok, srv.ClientURL()
	if n.cfg.TLS != nil {
		// As other processes dial it: over TLS, at the listen host (a
		// loopback one when it listens on every address).
		a := srv.Addr().(*net.TCPAddr)
		h := host
		if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
			h = "127.0.0.1"
		}
		n.url = "tls://" + net.JoinHostPort(h, strconv.Itoa(a.Port))
	}
	return nil
}

// loopback splits a host:port an embedded server listens on or dials,
// refusing any host but a loopback one; empty addr gives the defaults.
func loopback(what, addr, host string, port int) (string, int, error) {
	if addr == "" {
		return host, port, nil
	}
	h, port, err := hostPort(what, addr)
	if err != nil {
		return "", 0, err
	}
	ip := net.ParseIP(h)
	if h != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", 0, fmt.Errorf("cluster: an embedded server's %s address must be loopback only, not %q, unless it has TLS (serve --nats-listen-tls-cert/--nats-listen-tls-key); a token sent in the clear is not for a network", what, addr)
	}
	return h, port, nil
}

func hostPort(what, addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: %s address %q: %w", what, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: %s port %q: %w", what, p, err)
	}
	return h, port, nil
}

// token reads the embedded server's token, or makes one.
func token(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	t := hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("cluster: writing the server token: %w", err)
	}
	return t, nil
}

// maxState is the largest message: a run record holds its state inline.
const maxState = 8 << 20

var errTooOld = errors.New("cluster: the NATS server is too old")

// minServer is the oldest nats-server the cluster runs on: the work
// queue's and KV's features it uses are there by 2.10, and the scheduled
// messages that deny questions past their deadline came in 2.12.
const minServer = "2.12.0"

// tooOld reports whether version (x.y.z, maybe with a suffix) is older
// than minServer.
func tooOld(version string) bool {
	parse := func(v string) [3]int {
		var out [3]int
		v, _, _ = strings.Cut(v, "-")
		for i, part := range strings.SplitN(v, ".", 3) {
			out[i], _ = strconv.Atoi(part)
		}
		return out
	}
	a, b := parse(version), parse(minServer)
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func (n *Node) setup(ctx context.Context) error {
	if v := n.nc.ConnectedServerVersion(); tooOld(v) {
		return fmt.Errorf("%w: the NATS server at %s is version %s; the cluster needs %s or newer (JetStream work queues, KV and message schedules)", errTooOld, n.url, v, minServer)
	}
	js, err := jetstream.New(n.nc)
	if err != nil {
		return err
	}
	n.js = js
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("cluster: the NATS server at %s has no JetStream for this account (enable it: nats-server -js): %w", n.url, err)
	}
	n.work, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       workStream,
		Subjects:   []string{workSubject},
		Retention:  jetstream.WorkQueuePolicy,
		Duplicates: 2 * time.Minute,
		MaxMsgs:    100_000,
		Discard:    jetstream.DiscardNew,
		Replicas:   n.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("cluster: stream %s: %w", workStream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:     dlqStream,
		Subjects: []string{dlqSubject},
		MaxAge:   14 * 24 * time.Hour,
		Replicas: n.cfg.Replicas,
	}); err != nil {
		return fmt.Errorf("cluster: stream %s: %w", dlqStream, err)
	}
	if _, err := n.work.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:   consumer,
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   n.cfg.AckWait,
		// One delivery more than MaxDeliver: the last goes to a worker
		// that gives the job up rather than run it (Worker.deadLetter);
		// a job the server stops handing out would stay in the queue.
		MaxDeliver:    n.cfg.MaxDeliver + 1,
		MaxAckPending: 10_000,
	}); err != nil {
		return fmt.Errorf("cluster: consumer %s: %w", consumer, err)
	}
	// A cell's console lines, in order, each once: a worker that takes a
	// run over replays the lines since its last checkpoint under the same
	// message ids, and the stream drops them (see Worker.lines).
	if n.logs, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       logsStream,
		Subjects:   []string{"cm.logs.>"},
		MaxAge:     n.cfg.RecordTTL,
		Duplicates: 10 * time.Minute,
		MaxBytes:   1 << 30,
		Discard:    jetstream.DiscardOld,
		Replicas:   n.cfg.Replicas,
	}); err != nil {
		return fmt.Errorf("cluster: stream %s: %w", logsStream, err)
	}
	// Deadlines of parked runs: the servers publish each to
	// cm.timer.due when it is due, and a worker denies the questions
	// still unanswered.
	if n.tmrs, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              timerStream,
		Subjects:          []string{"cm.timer.>"},
		MaxAge:            n.cfg.RecordTTL,
		AllowMsgSchedules: true,
		Replicas:          n.cfg.Replicas,
	}); err != nil {
		return fmt.Errorf("cluster: stream %s: %w", timerStream, err)
	}
	if _, err := n.tmrs.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       timers,
		FilterSubject: dueSubject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       n.cfg.AckWait,
		MaxDeliver:    n.cfg.MaxDeliver,
	}); err != nil {
		return fmt.Errorf("cluster: consumer %s: %w", timers, err)
	}
	bucket := func(name string, ttl time.Duration) (bkv, error) {
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, History: 1, TTL: ttl, Replicas: n.cfg.Replicas, MaxValueSize: maxState,
		})
		if err != nil {
			return bkv{}, fmt.Errorf("cluster: bucket %s: %w", name, err)
		}
		return bkv{kv}, nil
	}
	if n.runs, err = bucket(runsBucket, n.cfg.RecordTTL); err != nil {
		return err
	}
	if n.led, err = bucket(callsBucket, n.cfg.RecordTTL); err != nil {
		return err
	}
	if n.stp, err = bucket(stepsBucket, n.cfg.RecordTTL); err != nil {
		return err
	}
	// Session values live until their session ends (Drop); the TTL only
	// bounds what a front that died without dropping its sessions leaves.
	if n.vals, err = bucket(valsBucket, n.cfg.RecordTTL); err != nil {
		return err
	}
	// A process's status expires when it stops renewing it.
	if n.nodes, err = bucket(nodesBucket, 4*statusEvery); err != nil {
		return err
	}
	return nil
}

// URL is the address other processes join with (Config.URL), and Token
// the embedded server's token they need (empty when this Node joined an
// existing NATS).
func (n *Node) URL() string   { return n.url }
func (n *Node) Token() string { return n.tok }

// Name is the name this process goes by in run records.
func (n *Node) Name() string { return n.cfg.Name }

// Close drains the connection and stops the embedded server, if any.
func (n *Node) Close() error {
	if n.stop != nil {
		n.stop()
		<-n.done
	}
	if n.nc != nil {
		_ = n.nc.Drain()
		for i := 0; i < 200 && !n.nc.IsClosed(); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		n.nc.Close()
	}
	n.shutdown()
	return nil
}

func (n *Node) shutdown() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	}
}
