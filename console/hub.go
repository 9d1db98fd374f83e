package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/codemode-go/codemode/cluster"
)

// hub follows the cluster's runs (cluster.Node.WatchRuns): it keeps an
// index of the runs, newest change first, and tells the open pages what
// changed, a batch at a time.
type hub struct {
	node *cluster.Node
	log  *slog.Logger

	mu     sync.Mutex
	runs   map[string]*entry
	ready  bool
	subs   map[*sub]struct{}
	failed error // the watch's last failure, shown until it recovers
}

// entry is what the index knows of a run without reading its record.
type entry struct {
	id      string
	updated time.Time
	cell    bool
	asking  bool
}

// sub is an open page's event stream: the changes since its last batch.
type sub struct {
	changed map[string]cluster.RunEventKind
	wake    chan struct{}
}

// maxBatch is how many changed runs a batch names; past it, it says only
// that many changed, and the pages reload their lists.
const maxBatch = 200

func newHub(n *cluster.Node, log *slog.Logger) *hub {
	return &hub{node: n, log: log, runs: map[string]*entry{}, subs: map[*sub]struct{}{}}
}

// run follows the runs until ctx ends, starting the watch again (after a
// pause) when it fails.
func (h *hub) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := h.node.WatchRuns(ctx, h.event)
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		h.failed = err
		h.mu.Unlock()
		h.log.Warn("the console's watch of the runs failed; starting it again", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

func (h *hub) event(ev cluster.RunEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ev.ID == "" {
		h.ready, h.failed = true, nil
		return
	}
	e := h.runs[ev.ID]
	if e == nil {
		if ev.Kind == cluster.RunGone {
			return
		}
		e = &entry{id: ev.ID}
		h.runs[ev.ID] = e
	}
	switch ev.Kind {
	case cluster.RunGone:
		delete(h.runs, ev.ID)
	case cluster.RunChanged:
		e.updated = ev.At
	case cluster.RunAsking:
		e.asking = true
	case cluster.RunAnswered:
		e.asking = false
	case cluster.CellStarted:
		e.cell = true
	}
	if !h.ready {
		return
	}
	for s := range h.subs {
		if len(s.changed) <= maxBatch {
			s.changed[ev.ID] = ev.Kind
		}
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// recent returns up to n run ids, the latest changed first, of cells
// only when cells is set.
func (h *hub) recent(n int, cells bool) []string {
	h.mu.Lock()
	es := make([]*entry, 0, len(h.runs))
	for _, e := range h.runs {
		if !e.updated.IsZero() && (!cells || e.cell) {
			es = append(es, e)
		}
	}
	h.mu.Unlock()
	slices.SortFunc(es, func(a, b *entry) int { return b.updated.Compare(a.updated) })
	ids := make([]string, 0, min(n, len(es)))
	for _, e := range es[:min(n, len(es))] {
		ids = append(ids, e.id)
	}
	return ids
}

// counts returns how many runs the index holds, and whether its first
// reading is done.
func (h *hub) counts() (runs int, ready bool, failed error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.runs), h.ready, h.failed
}

func (h *hub) subscribe() *sub {
	s := &sub{changed: map[string]cluster.RunEventKind{}, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// take returns the changes since the last take, or nil and true for
// "too many to name".
func (h *hub) take(s *sub) (map[string]cluster.RunEventKind, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	got := s.changed
	s.changed = map[string]cluster.RunEventKind{}
	if len(got) > maxBatch {
		return nil, true
	}
	return got, false
}

// change is one run's change as the pages get it.
type change struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // "run", "gone", "asking", "answered", "cell"
}

var kindNames = map[cluster.RunEventKind]string{
	cluster.RunChanged: "run", cluster.RunGone: "gone", cluster.RunAsking: "asking",
	cluster.RunAnswered: "answered", cluster.CellStarted: "cell",
}

// batchEvery is how often an open page gets the changes: often enough to
// look live, seldom enough that a busy cluster does not flood it.
const batchEvery = 250 * time.Millisecond

// events streams the changes to a page: "changes" events with a JSON
// array of changes, or "reload" when too many runs changed to name.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	s := c.hub.subscribe()
	defer c.hub.unsubscribe(s)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	fmt.Fprint(w, "retry: 2000\n: connected\n\n")
	fl.Flush()
	tick := time.NewTicker(batchEvery)
	defer tick.Stop()
	ping := time.NewTicker(20 * time.Second)
	defer ping.Stop()
	pending := false
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
			return
		case <-s.wake:
			pending = true
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
			fl.Flush()
		case <-tick.C:
			if !pending {
				continue
			}
			pending = false
			got, many := c.hub.take(s)
			if many {
				fmt.Fprint(w, "event: reload\ndata: {}\n\n")
			} else {
				list := make([]change, 0, len(got))
				for id, k := range got {
					list = append(list, change{ID: id, Kind: kindNames[k]})
				}
				b, _ := json.Marshal(list)
				fmt.Fprintf(w, "event: changes\ndata: %s\n\n", b)
			}
			fl.Flush()
		}
	}
}
