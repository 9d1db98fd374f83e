package codemode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Cells.
//
// Execute holds its caller until the run ends. A cell is a run that goes
// on after its caller stops waiting: Start begins it and returns its id,
// and Wait collects what it printed since the last Wait and, once it has
// ended, its Result. Wait sleeps until there is something to say — the
// run ended, or it printed YieldBytes — or its timeout passes; it never
// polls.

// Errors of cells.
var (
	// ErrNoCell: no cell has the id (it never existed, its Result was
	// collected, or it expired).
	ErrNoCell = errors.New("codemode: no such cell")
	// ErrTooManyCells: the session has CellOptions.MaxPerSession cells
	// whose Result has not been collected.
	ErrTooManyCells = errors.New("codemode: too many cells in this session")
)

// CellUpdate is what Wait returns.
type CellUpdate struct {
	// ID is the cell's.
	ID string
	// Logs are the console lines written since the last Wait.
	Logs []string
	// Done reports that the run has ended; Result is then its Result, as
	// Execute would have returned it (with every log line, Logs
	// included), and the cell is gone.
	Done   bool
	Result *Result
	// Err is what Execute would have returned with the Result (ctx's
	// error or ErrStopped for an interrupted run).
	Err error
}

type cell struct {
	id, session string
	cancel      context.CancelFunc

	mu       sync.Mutex
	logs     []string // not yet collected
	logBytes int
	done     bool
	res      Result
	err      error
	news     chan struct{} // closed when there is something for a waiter
	idle     *time.Timer   // expires the cell when nobody waits for it
	wakeups  atomic.Int64  // how often a Wait woke up, for tests
}

// CellOption configures Start.
type CellOption func(*cellOptions)

type cellOptions struct{ onEnd func() }

// OnCellEnd has f called when the cell's run has ended (before its Result
// is collected): a host that counts runs in flight releases its count.
func OnCellEnd(f func()) CellOption { return func(o *cellOptions) { o.onEnd = f } }

// CellOptions configure Cells. The zero value of every field means its
// documented default.
type CellOptions struct {
	// MaxPerSession bounds the cells of one session (WithSession; runs
	// without one share a session) whose Result has not been collected.
	// Zero means DefaultMaxCellsPerSession.
	MaxPerSession int

	// IdleTimeout ends a cell nobody has waited for in this long, and
	// forgets it. Zero means DefaultCellIdleTimeout.
	IdleTimeout time.Duration

	// YieldBytes is how much a cell prints before a Wait returns with it
	// (the run goes on). Zero means DefaultCellYieldBytes.
	YieldBytes int
}

// Defaults for zero CellOptions fields.
const (
	DefaultMaxCellsPerSession = 8
	DefaultCellIdleTimeout    = 10 * time.Minute
	DefaultCellYieldBytes     = 4096
)

// Cells keeps cells: runs that go on after their caller stops waiting,
// whatever Runtime each runs on, so a host that replaces its Runtime (new
// tools) keeps one Cells, and its cells with it. It is safe for
// concurrent use; the zero value is ready to use, with the default
// CellOptions.
type Cells struct {
	opts CellOptions

	mu     sync.Mutex
	cells  map[string]*cell
	count  map[string]int // cells by session
	closed bool
}

// NewCells makes a Cells. Negative options are an error
// (ErrInvalidOptions).
func NewCells(opts CellOptions) (*Cells, error) {
	if opts.MaxPerSession < 0 || opts.IdleTimeout < 0 || opts.YieldBytes < 0 {
		return nil, fmt.Errorf("%w: CellOptions may not be negative", ErrInvalidOptions)
	}
	return &Cells{opts: opts.withDefaults(), cells: map[string]*cell{}, count: map[string]int{}}, nil
}

// withDefaults fills in the zero fields.
func (o CellOptions) withDefaults() CellOptions {
	if o.MaxPerSession == 0 {
		o.MaxPerSession = DefaultMaxCellsPerSession
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultCellIdleTimeout
	}
	if o.YieldBytes == 0 {
		o.YieldBytes = DefaultCellYieldBytes
	}
	return o
}

// ready fills in what a zero Cells lacks; cs.mu is held.
func (cs *Cells) ready() {
	if cs.cells != nil {
		return
	}
	cs.cells, cs.count = map[string]*cell{}, map[string]int{}
	cs.opts = cs.opts.withDefaults()
}

// Start runs code on rt in a cell: the run goes on after Start returns,
// until it ends, its cell is cancelled, it expires (nobody waited for it
// for IdleTimeout), or rt or the Cells is closed. The run's context keeps
// ctx's values (the session, a trace) but not its end. It returns the
// cell's id, ErrTooManyCells when ctx's session (WithSession) has
// MaxPerSession cells already, or ErrClosed.
func (cs *Cells) Start(ctx context.Context, rt *Runtime, code string, opts ...CellOption) (string, error) {
	var co cellOptions
	for _, o := range opts {
		o(&co)
	}
	if rt.isClosed() {
		return "", ErrClosed
	}
	session := sessionOf(ctx)
	c := &cell{id: "c-" + newRunID()[:16], session: session, news: make(chan struct{})}
	cs.mu.Lock()
	cs.ready()
	switch {
	case cs.closed:
		cs.mu.Unlock()
		return "", ErrClosed
	case cs.count[session] >= cs.opts.MaxPerSession:
		cs.mu.Unlock()
		return "", fmt.Errorf("%w: %d cells have not been collected; Wait for them or Cancel them", ErrTooManyCells, cs.opts.MaxPerSession)
	}
	cs.cells[c.id] = c
	cs.count[session]++
	cs.mu.Unlock()

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.idle = time.AfterFunc(cs.opts.IdleTimeout, func() { cs.expire(c) })
	runCtx = WithLogListener(runCtx, func(line string) { c.print(line, cs.opts.YieldBytes) })
	started := make(chan struct{})
	go func() {
		defer cancel()
		if co.onEnd != nil {
			defer co.onEnd()
		}
		res, err := rt.executeLogged(runCtx, code, started)
		c.mu.Lock()
		c.done, c.res, c.err = true, res, err
		c.wake()
		c.mu.Unlock()
	}()
	<-started
	return c.id, nil
}

// Close cancels every cell (their Waits return partial Results) and
// refuses new ones.
func (cs *Cells) Close() {
	cs.mu.Lock()
	cs.closed = true
	var all []*cell
	for _, c := range cs.cells {
		all = append(all, c)
	}
	cs.mu.Unlock()
	for _, c := range all {
		c.cancel()
	}
}

// print collects a line and wakes a waiter once threshold bytes are
// waiting.
func (c *cell) print(line string, threshold int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logs = append(c.logs, line)
	c.logBytes += len(line) + 1
	if c.logBytes >= threshold {
		c.wake()
	}
}

// wake tells waiters there is news; c.mu is held.
func (c *cell) wake() {
	close(c.news)
	c.news = make(chan struct{})
}

// Wait returns the cell's news: the lines it printed since the last Wait,
// and its Result once it has ended. It returns as soon as the run ends or
// has printed YieldBytes since the last Wait, else when timeout
// passes (with what there is, possibly nothing; zero or less means no
// timeout) or ctx ends (with ctx's error). Each Wait restarts the cell's
// idle expiry. A cell belongs to the session that started it (the
// session of Start's ctx, see WithSession): from any other, Wait returns
// ErrNoCell, as if there were no such cell.
func (cs *Cells) Wait(ctx context.Context, id string, timeout time.Duration) (CellUpdate, error) {
	c := cs.cell(sessionOf(ctx), id)
	if c == nil {
		return CellUpdate{ID: id}, fmt.Errorf("%w: %s", ErrNoCell, id)
	}
	c.idle.Reset(cs.opts.IdleTimeout)
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	for {
		c.mu.Lock()
		if c.done || c.logBytes >= cs.opts.YieldBytes {
			break
		}
		news := c.news
		c.mu.Unlock()
		select {
		case <-news:
			c.wakeups.Add(1)
			continue
		case <-timer:
		case <-ctx.Done():
			return CellUpdate{ID: id}, ctx.Err()
		}
		c.mu.Lock()
		break
	}
	defer c.mu.Unlock()
	u := CellUpdate{ID: id, Logs: c.logs, Done: c.done}
	c.logs, c.logBytes = nil, 0
	if c.done {
		res := c.res
		u.Result, u.Err = &res, c.err
		cs.drop(c)
		return u, nil
	}
	c.idle.Reset(cs.opts.IdleTimeout)
	return u, nil
}

// Cancel stops a cell's run; its last Wait returns the partial Result
// with ctx.Canceled. As with Wait, only the cell's own session (ctx's)
// can cancel it.
func (cs *Cells) Cancel(ctx context.Context, id string) error {
	c := cs.cell(sessionOf(ctx), id)
	if c == nil {
		return fmt.Errorf("%w: %s", ErrNoCell, id)
	}
	c.cancel()
	return nil
}

// cell finds a cell of a session.
func (cs *Cells) cell(session, id string) *cell {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.cells[id]; c != nil && c.session == session {
		return c
	}
	return nil
}

// drop forgets a cell (its Result was collected, or it expired).
func (cs *Cells) drop(c *cell) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.cells[c.id] != c {
		return
	}
	delete(cs.cells, c.id)
	if cs.count[c.session]--; cs.count[c.session] == 0 {
		delete(cs.count, c.session)
	}
	c.idle.Stop()
}

// expire ends a cell nobody waited for in IdleTimeout.
func (cs *Cells) expire(c *cell) {
	c.cancel()
	cs.drop(c)
}
