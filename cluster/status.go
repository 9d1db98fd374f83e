package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Node status and drain.
//
// A process that serves requests (Config.Front) or runs a worker says
// what it is every few seconds in the bucket CM_NODES, whose entries
// expire when it stops saying so: Nodes lists the processes alive now.
// Drain asks a worker, by name, to take no more jobs, finish the runs it
// holds and stop.

const (
	nodesBucket = "CM_NODES"
	statusEvery = 5 * time.Second
)

// NodeStatus is what a process of the cluster says of itself.
type NodeStatus struct {
	Name string `json:"name"`
	Host string `json:"host"`
	// Front: it serves requests (Config.Front).
	Front bool `json:"front,omitempty"`
	// Workers are the workers it runs (usually none or one).
	Workers []WorkerStatus `json:"workers,omitempty"`
	// Engine is the SHA-256 of its engine build: a run's state resumes
	// only on a worker with the same.
	Engine  string    `json:"engine"`
	Started time.Time `json:"started"`
	Seen    time.Time `json:"seen"`
}

// WorkerStatus is a worker's part of its NodeStatus.
type WorkerStatus struct {
	// Slots is how many runs it takes at once, Busy how many it holds.
	Slots int `json:"slots"`
	Busy  int `json:"busy"`
	// Tree is its tool tree's sum (Runtime.ToolTreeSum): a front's job
	// runs only on a worker with the front's.
	Tree string `json:"tree"`
	// Draining: it takes no more jobs and stops once its runs end.
	Draining bool `json:"draining,omitempty"`
}

func nodeKey(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "n." + hex.EncodeToString(sum[:12])
}

func drainSubject(name string) string { return "cm.drain." + nodeKey(name)[2:] }

// status is this process's NodeStatus now.
func (n *Node) status() NodeStatus {
	host, _ := os.Hostname()
	s := NodeStatus{Name: n.cfg.Name, Host: host, Front: n.cfg.Front, Engine: enginebin.SHA256, Started: n.started, Seen: time.Now().UTC()}
	n.mu.Lock()
	for _, w := range n.workers {
		s.Workers = append(s.Workers, w.status())
	}
	n.mu.Unlock()
	return s
}

// announce keeps this process's status in CM_NODES until ctx ends, then
// removes it.
func (n *Node) announce(ctx context.Context) {
	key := nodeKey(n.cfg.Name)
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	was := false
	for {
		c, cancel := context.WithTimeout(ctx, opTimeout)
		if n.listed() {
			_, _ = n.nodes.Put(c, key, mustJSON(n.status()))
			was = true
		} else if was {
			_ = n.nodes.Delete(c, key)
			was = false
		}
		cancel()
		select {
		case <-ctx.Done():
			if was {
				c, cancel := context.WithTimeout(context.Background(), opTimeout)
				_ = n.nodes.Delete(c, key)
				cancel()
			}
			return
		case <-t.C:
		case <-n.changed:
		}
	}
}

// register adds a running worker to this process's status, or removes
// it.
func (n *Node) register(w *Worker, running bool) {
	n.mu.Lock()
	if running {
		n.workers = append(n.workers, w)
	} else {
		n.workers = slices.DeleteFunc(n.workers, func(x *Worker) bool { return x == w })
	}
	n.mu.Unlock()
	n.touch()
}

// listed: the process is a front or runs a worker.
func (n *Node) listed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg.Front || len(n.workers) > 0
}

// touch has the status written now.
func (n *Node) touch() {
	select {
	case n.changed <- struct{}{}:
	default:
	}
}

// Nodes lists the cluster's processes that are alive (fronts and
// workers), by name.
func (n *Node) Nodes(ctx context.Context) ([]NodeStatus, error) {
	keys, err := n.nodes.KeyValue.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []NodeStatus
	for k := range keys.Keys() {
		e, err := n.nodes.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		var s NodeStatus
		if json.Unmarshal(e.Value(), &s) == nil {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b NodeStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ErrNoWorker: Drain named a process that runs no worker (or none is
// alive by that name).
var ErrNoWorker = errors.New("cluster: no worker by that name")

// Drain asks the workers of the process named name (NodeStatus.Name) to
// take no more jobs, finish the runs they hold and stop; it returns once
// they have been told, with how many runs they hold.
func (n *Node) Drain(ctx context.Context, name string) (int, error) {
	c, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	m, err := n.nc.RequestWithContext(c, drainSubject(name), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return 0, fmt.Errorf("%w: %q", ErrNoWorker, name)
	} else if err != nil {
		return 0, err
	}
	var busy int
	_ = json.Unmarshal(m.Data, &busy)
	return busy, nil
}
