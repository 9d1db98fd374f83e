package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cluster"
	"github.com/codemode-go/codemode/internal/secret"
	"github.com/nats-io/nats.go"
)

const serveUsage = `Usage: codemode serve [--worker] [flags]

The front of a cluster: "codemode mcp" whose programs run on workers
(codemode worker, or this process with --worker) through NATS JetStream,
so a run survives the worker that runs it. Tool calls that may change
something are checkpointed first and recorded after; a worker that takes
over a run never makes such a call twice, and tells the program when a
call's outcome is unknown (RATIONALE.md, "What is exactly once in the
cluster?").

By default the process starts an embedded NATS server with JetStream,
keeping its data in --data and listening on loopback behind a token kept
there: "codemode serve --worker" needs nothing installed. Workers on this
machine join with "codemode worker --data DIR" and the same tool flags.
For several machines, run a NATS cluster with TLS and accounts and give
every process --nats URL (with --nats-creds or --nats-token-env and the
--nats-tls-* files). Every worker needs the same --state-key-file.

A call --policy asks about parks its run (it waits in the cluster, not on
a worker) while the front asks the user by elicitation. With --cells, a
run that outlives its execute call goes on on a worker, and wait on any
front of the session collects its lines and result.

With --http, the console is at http://ADDR/console/ (behind the same
token: a browser logs in once): the questions runs wait on, to approve or
deny; recent runs with their program, tool calls on a time line, logs and
result; cells' lines as they come, and a stop button; a playground to try
programs against the tools; and the cluster's processes, to drain.

"codemode nodes" lists the fronts and workers alive; "codemode drain
NAME" has a worker finish its runs and stop.

Every flag of "codemode mcp" applies, and these:
`

const workerUsage = `Usage: codemode worker [flags]

Runs the programs of a cluster's fronts (codemode serve): give it the same
tool flags as the fronts (--config, --openapi, --demo-tools ...), or
--tools-from-cluster to build them from the manifest the fronts publish,
the same --state-key-file, and either --data DIR of an embedded server on
this machine or --nats URL. It runs until SIGINT or SIGTERM, then finishes the
runs it holds before it exits.
`

// clusterFlags say how a process joins the cluster and what its worker
// does.
type clusterFlags struct {
	worker     bool // serve only: run a worker in this process too
	console    bool // serve only: serve the console at /console/ with --http
	traceURL   string
	data       string
	listen     string
	natsURL    string
	tokenEnv   string
	user       string
	passEnv    string
	creds      string
	tlsCA      string
	tlsCert    string
	tlsKey     string
	keyFile    string
	runs       int
	ackWait    duration
	askInDoubt bool

	listenCert    string // serve: TLS for the embedded server's clients
	listenKey     string
	clusterListen string // serve: cluster the embedded server
	routes        string
	replicas      int
}

func (c *clusterFlags) register(fs *flag.FlagSet, serve bool) {
	data, key := "", ""
	if root, err := secret.Root(); err == nil {
		data, key = filepath.Join(root, "cluster"), filepath.Join(root, keyFileName)
	}
	if serve {
		fs.BoolVar(&c.worker, "worker", false, "run a worker in this process too (one machine needs nothing else)")
		fs.StringVar(&c.listen, "nats-listen", "", "`host:port` of the embedded NATS server, loopback only without --nats-listen-tls-cert (default 127.0.0.1 on a free port, written to DIR/url)")
		fs.StringVar(&c.listenCert, "nats-listen-tls-cert", "", "certificate `file` the embedded NATS server presents: clients connect over TLS, and --nats-listen may be an address other machines reach")
		fs.StringVar(&c.listenKey, "nats-listen-tls-key", "", "key `file` of --nats-listen-tls-cert")
		fs.StringVar(&c.clusterListen, "nats-cluster-listen", "", "cluster the embedded server: listen for routes at `host:port` (loopback only; every server needs the same --nats-token-env)")
		fs.StringVar(&c.routes, "nats-routes", "", "the other embedded servers' --nats-cluster-listen addresses, `host:port,...`")
		fs.BoolVar(&c.console, "console", true, "with --http, serve the console (questions to answer, runs, cells, a playground, nodes) at /console/, behind the same token")
		fs.StringVar(&c.traceURL, "console-trace-url", "", "link runs' OpenTelemetry trace ids to a tracing UI: a `URL` with {trace}, such as http://localhost:16686/trace/{trace}")
	}
	fs.IntVar(&c.replicas, "replicas", 1, "copies of each stream and bucket the servers keep: 1 on one server, 3 in a cluster")
	c.registerJoin(fs, data)
	fs.StringVar(&c.keyFile, "state-key-file", key, "file with the key (32 bytes or more) that authenticates run states; every worker needs the same; made with a random key if missing")
	fs.IntVar(&c.runs, "worker-runs", 4, "most programs a worker runs at once")
	fs.BoolVar(&c.askInDoubt, "ask-in-doubt", false, "a call whose outcome is unknown after its worker died becomes a question for the user (make it again?) instead of an error for the program")
	c.ackWait = duration(10 * time.Second)
	fs.Var(&c.ackWait, "ack-wait", "how long a silent worker keeps its runs before another takes them over, a `duration`")
}

// manifestSources opens the tools of the manifest the fronts published,
// reading it with a node of its own before the worker joins.
func (c *clusterFlags) manifestSources(ctx context.Context, sf *sourceFlags, logger *slog.Logger) (*toolSource, func(), error) {
	cfg, err := c.config(true)
	if err != nil {
		return nil, nil, usageError{err}
	}
	cfg.Front = false
	key, err := secret.Key(c.keyFile, codemode.MinStateKeyBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("state key: %w", err)
	}
	node, err := cluster.Open(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer node.Close()
	return manifestSources(ctx, node, key, sf, logger)
}

// registerJoin adds the flags that say where the cluster is.
func (c *clusterFlags) registerJoin(fs *flag.FlagSet, data string) {
	fs.StringVar(&c.data, "data", data, "`directory` of the embedded NATS server's data and token (serve starts it; worker joins it)")
	fs.StringVar(&c.natsURL, "nats", "", "join the NATS server or cluster at `URL` instead of an embedded one")
	fs.StringVar(&c.tokenEnv, "nats-token-env", "", "environment variable `NAME` holding the NATS token")
	fs.StringVar(&c.user, "nats-user", "", "NATS user `name` (with --nats-password-env)")
	fs.StringVar(&c.passEnv, "nats-password-env", "", "environment variable `NAME` holding the NATS user's password")
	fs.StringVar(&c.creds, "nats-creds", "", "NATS credentials `file` (user JWT and seed)")
	fs.StringVar(&c.tlsCA, "nats-tls-ca", "", "`file` of CA certificates the NATS servers' certificates are checked against")
	fs.StringVar(&c.tlsCert, "nats-tls-cert", "", "client certificate `file` for NATS (with --nats-tls-key)")
	fs.StringVar(&c.tlsKey, "nats-tls-key", "", "client key `file` for NATS")
}

// config is the cluster.Config the flags describe; asWorker joins the
// embedded server of --data rather than starting one.
func (c *clusterFlags) config(asWorker bool) (cluster.Config, error) {
	cfg := cluster.Config{URL: c.natsURL, DataDir: c.data, Listen: c.listen, AckWait: time.Duration(c.ackWait),
		Replicas: c.replicas, ClusterListen: c.clusterListen, Front: !asWorker}
	if c.routes != "" {
		cfg.Routes = strings.Split(c.routes, ",")
	}
	if c.runs < 1 {
		return cfg, errors.New("--worker-runs must be at least 1")
	}
	if c.replicas < 1 || c.replicas > 5 {
		return cfg, errors.New("--replicas must be 1 to 5")
	}
	if (c.clusterListen == "") != (c.routes == "") {
		return cfg, errors.New("--nats-cluster-listen and --nats-routes go together")
	}
	if c.natsURL == "" {
		if c.tokenEnv != "" {
			if cfg.Token = os.Getenv(c.tokenEnv); cfg.Token == "" {
				return cfg, fmt.Errorf("--nats-token-env: the environment variable %s is empty or unset", c.tokenEnv)
			}
		}
		if c.data == "" {
			return cfg, errors.New("no --data and no configuration directory to keep the embedded server's data in; give --data DIR or --nats URL")
		}
		if asWorker {
			// Join the embedded server a front on this machine started.
			url, err := os.ReadFile(filepath.Join(c.data, "url"))
			if err != nil {
				return cfg, fmt.Errorf("no cluster to join in --data %s (start codemode serve first, or give --nats URL): %v", c.data, err)
			}
			tok := []byte(cfg.Token) // --nats-token-env, else the file
			if len(tok) == 0 {
				if tok, err = os.ReadFile(filepath.Join(c.data, "token")); err != nil {
					return cfg, fmt.Errorf("the embedded server's token in --data %s: %v", c.data, err)
				}
			}
			cfg.URL, cfg.Token = strings.TrimSpace(string(url)), ""
			cfg.Options = append(cfg.Options, nats.Token(strings.TrimSpace(string(tok))))
			// An embedded server with TLS is dialled over TLS.
			return cfg, c.clientTLS(&cfg)
		}
		if (c.listenCert == "") != (c.listenKey == "") {
			return cfg, errors.New("--nats-listen-tls-cert and --nats-listen-tls-key go together")
		}
		if c.listenCert != "" {
			pair, err := tls.LoadX509KeyPair(c.listenCert, c.listenKey)
			if err != nil {
				return cfg, fmt.Errorf("--nats-listen-tls-cert/--nats-listen-tls-key: %w", err)
			}
			cfg.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		}
		return cfg, nil
	}
	if c.tokenEnv != "" {
		tok := os.Getenv(c.tokenEnv)
		if tok == "" {
			return cfg, fmt.Errorf("--nats-token-env: the environment variable %s is empty or unset", c.tokenEnv)
		}
		cfg.Options = append(cfg.Options, nats.Token(tok))
	}
	if (c.user == "") != (c.passEnv == "") {
		return cfg, errors.New("--nats-user and --nats-password-env go together")
	}
	if c.user != "" {
		pass := os.Getenv(c.passEnv)
		if pass == "" {
			return cfg, fmt.Errorf("--nats-password-env: the environment variable %s is empty or unset", c.passEnv)
		}
		cfg.Options = append(cfg.Options, nats.UserInfo(c.user, pass))
	}
	if c.creds != "" {
		cfg.Options = append(cfg.Options, nats.UserCredentials(c.creds))
	}
	return cfg, c.clientTLS(&cfg)
}

// clientTLS adds the --nats-tls-* options.
func (c *clusterFlags) clientTLS(cfg *cluster.Config) error {
	if c.tlsCA != "" {
		cfg.Options = append(cfg.Options, nats.RootCAs(c.tlsCA))
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return errors.New("--nats-tls-cert and --nats-tls-key go together")
	}
	if c.tlsCert != "" {
		cfg.Options = append(cfg.Options, nats.ClientCert(c.tlsCert, c.tlsKey))
	}
	return nil
}

// member is this process in the cluster: its node and, when it runs
// one, its worker.
type member struct {
	node    *cluster.Node
	worker  *cluster.Worker
	stop    context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
	stopped chan struct{} // closed when the worker's Run has returned (drained)
}

// join opens the node and starts a worker when asked. opts are the
// Runtime options of the worker's runs (their tools included).
func (c *clusterFlags) join(ctx context.Context, asWorker, runWorker bool, opts codemode.Options, logger *slog.Logger) (*member, error) {
	cfg, err := c.config(asWorker)
	if err != nil {
		return nil, usageError{err}
	}
	node, err := cluster.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	m := &member{node: node, stopped: make(chan struct{})}
	if cfg.URL == "" {
		// Workers on this machine find the server here.
		if err := os.WriteFile(filepath.Join(c.data, "url"), []byte(node.URL()+"\n"), 0o600); err != nil {
			node.Close()
			return nil, fmt.Errorf("writing the server's address: %w", err)
		}
		logger.Info("embedded NATS server started", "url", node.URL(), "data", c.data,
			"join", "codemode worker --data "+c.data+" (with the same tool flags, or --tools-from-cluster)")
		if cfg.TLS != nil {
			logger.Info("other machines join over TLS", "join", "codemode worker --nats "+node.URL()+
				" (with this host's name) --nats-tls-ca CA_FILE --nats-token-env NAME (NAME holding the token in "+filepath.Join(c.data, "token")+")")
		}
	}
	if !runWorker {
		return m, nil
	}
	key, err := secret.Key(c.keyFile, codemode.MinStateKeyBytes)
	if err != nil {
		node.Close()
		return nil, fmt.Errorf("state key: %w", err)
	}
	opts.StateKey = key
	w, err := cluster.NewWorker(node, opts, cluster.WorkerOptions{MaxRuns: c.runs, Logger: logger, AskInDoubt: c.askInDoubt})
	if err != nil {
		node.Close()
		return nil, err
	}
	m.worker = w
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	m.stop = stop
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(m.stopped)
		if err := w.Run(wctx); err != nil {
			logger.Error("the worker stopped", "error", err)
		} else if wctx.Err() == nil {
			logger.Info("the worker drained: its runs have ended, and it takes no more")
		}
	}()
	logger.Info("worker started", "runs", c.runs)
	return m, nil
}

// setTools gives the worker a new tool tree.
func (m *member) setTools(tools codemode.Tools, logger *slog.Logger) {
	if m == nil || m.worker == nil {
		return
	}
	if err := m.worker.SetTools(tools); err != nil {
		logger.Error("the worker refused the new tool list; keeping the old one", "error", err)
	}
}

// close stops taking jobs, finishes the runs under way and leaves.
func (m *member) close() {
	if m == nil {
		return
	}
	m.once.Do(func() {
		if m.stop != nil {
			m.stop()
			m.wg.Wait()
			_ = m.worker.Close()
		}
		_ = m.node.Close()
	})
}

// usageError marks an error in the flags.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// serveCmd is "codemode serve": codemode mcp as the front of a cluster.
func serveCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runMCPAs(ctx, "serve", args, stdin, stdout, stderr)
}

// workerCmd is "codemode worker".
func workerCmd(args []string, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runWorker(ctx, args, stderr)
}

func runWorker(ctx context.Context, args []string, stderr io.Writer) int {
	fs := newFlagSet("worker", workerUsage, stderr)
	var rf runtimeFlags
	var sf sourceFlags
	var cf clusterFlags
	sf.register(fs, true, "info")
	rf.registerLimits(fs)
	rf.registerRun(fs)
	rf.registerEngine(fs)
	cf.register(fs, false)
	fromCluster := fs.Bool("tools-from-cluster", false, "build the tools from the manifest the fronts publish (their --config, --openapi and --demo-tools, the files inlined), and follow it, instead of tool flags of its own")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(rest) != 0 {
		fmt.Fprintf(stderr, "codemode worker: unexpected arguments %q\n", rest)
		return exitUsage
	}
	logger, err := sf.logger(stderr, true)
	if err != nil {
		fmt.Fprintf(stderr, "codemode worker: %v\n", err)
		return exitUsage
	}
	if err := rf.check(); err != nil {
		fmt.Fprintf(stderr, "codemode worker: %v\n", err)
		return exitUsage
	}
	logger = slog.New(quietSDK{logger.Handler()})
	if *fromCluster && sf.usesTools() {
		fmt.Fprintln(stderr, "codemode worker: --tools-from-cluster takes the fronts' tools; give no --config, --openapi or --demo-tools")
		return exitUsage
	}
	var src *toolSource
	cleanup := func() {}
	if *fromCluster {
		src, cleanup, err = cf.manifestSources(ctx, &sf, logger)
	} else {
		src, err = sf.open(ctx, logger, false) // the whole tree before taking jobs
	}
	if err != nil {
		fmt.Fprintf(stderr, "codemode worker: %v\n", err)
		switch {
		case errors.As(err, new(usageError)):
			return exitUsage
		case *fromCluster:
			return exitFailure // the cluster's or the manifest's fault, not the flags'
		}
		return exitFor(err)
	}
	// The current source; the manifest's changes replace it.
	var srcMu sync.Mutex
	current := func() (*toolSource, func()) {
		srcMu.Lock()
		defer srcMu.Unlock()
		return src, cleanup
	}
	var retired []*toolSource // replaced, closed a minute later or at the end
	defer func() {
		s, c := current()
		s.close()
		c()
		srcMu.Lock()
		for _, r := range retired {
			r.close()
		}
		srcMu.Unlock()
	}()
	m, err := cf.join(ctx, true, true, rf.options(src.tools()), logger)
	if err != nil {
		fmt.Fprintf(stderr, "codemode worker: %v\n", err)
		if errors.As(err, new(usageError)) {
			return exitUsage
		}
		return exitFailure
	}
	var follow sync.WaitGroup
	if *fromCluster {
		// A front that publishes another manifest (it restarted with
		// other tools) gets workers with its tools: the old tree's runs
		// finish, and its source closes once no job needs it.
		key, _ := secret.Key(cf.keyFile, codemode.MinStateKeyBytes)
		err := m.node.WatchManifest(ctx, key, func(b []byte, err error) {
			if err != nil {
				logger.Error("a published tool manifest was refused", "error", err)
				return
			}
			next, nextCleanup, err := sourcesOf(ctx, b, &sf, logger)
			if err != nil {
				logger.Error("the fronts' new tools could not be built; keeping the old ones", "error", err)
				return
			}
			srcMu.Lock()
			defer srcMu.Unlock()
			m.setTools(next.tools(), logger)
			logger.Info("tools rebuilt from the fronts' new manifest")
			old, oldCleanup := src, cleanup
			src, cleanup = next, nextCleanup
			retired = append(retired, old)
			go func() {
				// Runs under way may still call the old servers.
				time.Sleep(time.Minute)
				old.close()
				oldCleanup()
			}()
		})
		if err != nil {
			logger.Warn("following the tool manifest failed", "error", err)
		}
	} else if ch := src.changed(); ch != nil {
		follow.Add(1)
		go func() {
			defer follow.Done()
			for range ch {
				m.setTools(src.tools(), logger)
			}
		}()
	}
	select {
	case <-ctx.Done():
		logger.Info("stopping: finishing the runs under way")
	case <-m.stopped:
	}
	m.close()
	s, _ := current()
	s.close()
	follow.Wait()
	return exitOK
}

const nodesUsage = `Usage: codemode nodes [--json] [flags]

Lists the cluster's fronts and workers that are alive: name, host, role,
a worker's busy and total slots, whether it is draining, and its tool tree
and engine build (a run moves only between workers with the same). Give
--data DIR of the embedded server on this machine, or --nats URL.
`

const drainUsage = `Usage: codemode drain [flags] NAME

Asks the worker NAME (as codemode nodes lists it) to take no more jobs,
finish the runs it holds and stop; its process exits once they have ended.
Runs waiting in the queue go to the other workers. Give --data DIR or
--nats URL as for codemode nodes.
`

// adminNode joins the cluster for nodes and drain, without a role of its
// own.
func adminNode(ctx context.Context, name string, args []string, usage string, stderr io.Writer, extra func(*flag.FlagSet)) (*cluster.Node, []string, int) {
	fs := newFlagSet(name, usage, stderr)
	var cf clusterFlags
	data := ""
	if root, err := secret.Root(); err == nil {
		data = filepath.Join(root, "cluster")
	}
	cf.registerJoin(fs, data)
	cf.runs, cf.replicas, cf.ackWait = 1, 1, duration(10*time.Second)
	if extra != nil {
		extra(fs)
	}
	rest, err := parseArgs(fs, args)
	if err != nil {
		return nil, nil, parseError(err)
	}
	cfg, err := cf.config(true)
	if err != nil {
		fmt.Fprintf(stderr, "codemode %s: %v\n", name, err)
		return nil, nil, exitUsage
	}
	cfg.Front = false
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	node, err := cluster.Open(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "codemode %s: %v\n", name, err)
		return nil, nil, exitFailure
	}
	return node, rest, exitOK
}

// nodesCmd is "codemode nodes".
func nodesCmd(args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	node, rest, code := adminNode(context.Background(), "nodes", args, nodesUsage, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print the list as JSON")
	})
	if node == nil {
		return code
	}
	defer node.Close()
	if len(rest) != 0 {
		fmt.Fprintf(stderr, "codemode nodes: unexpected arguments %q\n", rest)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := node.Nodes(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "codemode nodes: %v\n", err)
		return exitFailure
	}
	if asJSON {
		if list == nil {
			list = []cluster.NodeStatus{}
		}
		if err := writeJSON(stdout, list, true); err != nil {
			return exitFailure
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOST\tROLE\tRUNS\tSTATE\tTREE\tENGINE\tUP")
	for _, n := range list {
		role, runs, state, tree := "front", "-", "", "-"
		if len(n.Workers) > 0 {
			role = "worker"
			if n.Front {
				role = "front+worker"
			}
			busy, slots := 0, 0
			for _, w := range n.Workers {
				busy, slots, tree = busy+w.Busy, slots+w.Slots, w.Tree
				if w.Draining {
					state = "draining"
				}
			}
			runs = fmt.Sprintf("%d/%d", busy, slots)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.12s\t%.12s\t%s\n", n.Name, n.Host, role, runs, cmp.Or(state, "up"), tree, n.Engine,
			time.Since(n.Started).Round(time.Second))
	}
	_ = tw.Flush()
	return exitOK
}

// drainCmd is "codemode drain".
func drainCmd(args []string, stdout, stderr io.Writer) int {
	node, rest, code := adminNode(context.Background(), "drain", args, drainUsage, stderr, nil)
	if node == nil {
		return code
	}
	defer node.Close()
	if len(rest) != 1 {
		fmt.Fprintln(stderr, "codemode drain: give the NAME of one worker (codemode nodes lists them)")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	busy, err := node.Drain(ctx, rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "codemode drain: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "%s is draining: it finishes its %d run(s) under way, then stops\n", rest[0], busy)
	return exitOK
}
