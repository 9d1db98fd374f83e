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
// run ended, or it printed CellYieldBytes — or its timeout passes; it
// never polls.

// Errors of cells.
var (
	// ErrNoCell: no cell has the id (it never existed, its Result was
	// collected, or it expired).
	ErrNoCell = errors.New("codemode: no such cell")
	// ErrTooManyCells: the session has MaxCellsPerSession cells whose
	// Result has not been collected.
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

type cellTable struct {
	mu    sync.Mutex
	cells map[string]*cell
	count map[string]int // cells by session
}

// Start runs code in a cell: the run goes on after Start returns, until
// it ends, its cell is cancelled, it expires (nobody waited for it for
// CellIdleTimeout), or the Runtime is closed. The run's context keeps
// ctx's values (the session, a trace) but not its end. It returns the
// cell's id, ErrTooManyCells when ctx's session (WithSession) has
// MaxCellsPerSession cells already, or ErrClosed.
func (rt *Runtime) Start(ctx context.Context, code string, opts ...CellOption) (string, error) {
	var co cellOptions
	for _, o := range opts {
		o(&co)
	}
	if rt.isClosed() {
		return "", ErrClosed
	}
	session := sessionOf(ctx)
	c := &cell{id: "c-" + newRunID()[:16], session: session, news: make(chan struct{})}
	t := &rt.cellTab
	t.mu.Lock()
	if t.count[session] >= rt.opts.MaxCellsPerSession {
		t.mu.Unlock()
		return "", fmt.Errorf("%w: %d cells have not been collected; Wait for them or Cancel them", ErrTooManyCells, rt.opts.MaxCellsPerSession)
	}
	if t.cells == nil {
		t.cells, t.count = map[string]*cell{}, map[string]int{}
	}
	t.cells[c.id] = c
	t.count[session]++
	t.mu.Unlock()

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.idle = time.AfterFunc(rt.opts.CellIdleTimeout, func() { rt.expireCell(c) })
	started := make(chan struct{})
	go func() {
		defer cancel()
		if co.onEnd != nil {
			defer co.onEnd()
		}
		res, err := rt.executeLogged(runCtx, code, started, func(line string) { c.print(line, rt.opts.CellYieldBytes) })
		c.mu.Lock()
		c.done, c.res, c.err = true, res, err
		c.wake()
		c.mu.Unlock()
	}()
	<-started
	return c.id, nil
}

// executeLogged is Execute with a log listener (nil for none); started,
// when not nil, is closed once the run is registered with the Runtime (or
// refused).
func (rt *Runtime) executeLogged(ctx context.Context, code string, started chan struct{}, onLog func(string)) (Result, error) {
	var tel *runTelemetry
	if rt.tel != nil {
		ctx, tel = rt.tel.startRun(ctx, code)
	}
	runCtx, done, err := rt.enter(ctx)
	if started != nil {
		close(started)
	}
	if err != nil {
		res := Result{ToolCalls: []ToolCall{}}
		if tel != nil {
			tel.end(res, err)
		}
		return res, err
	}
	defer done()
	res, err := rt.execute(runCtx, code, onLog)
	err = rt.interruption(ctx, runCtx, err)
	if tel != nil {
		tel.end(res, err)
	}
	return res, err
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
// has printed CellYieldBytes since the last Wait, else when timeout
// passes (with what there is, possibly nothing; zero or less means no
// timeout) or ctx ends (with ctx's error). Each Wait restarts the cell's
// idle expiry. A cell belongs to the session that started it (the
// session of Start's ctx, see WithSession): from any other, Wait returns
// ErrNoCell, as if there were no such cell.
func (rt *Runtime) Wait(ctx context.Context, id string, timeout time.Duration) (CellUpdate, error) {
	c := rt.cell(sessionOf(ctx), id)
	if c == nil {
		return CellUpdate{ID: id}, fmt.Errorf("%w: %s", ErrNoCell, id)
	}
	c.idle.Reset(rt.opts.CellIdleTimeout)
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	for {
		c.mu.Lock()
		if c.done || c.logBytes >= rt.opts.CellYieldBytes {
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
		rt.dropCell(c)
		return u, nil
	}
	c.idle.Reset(rt.opts.CellIdleTimeout)
	return u, nil
}

// Cancel stops a cell's run; its last Wait returns the partial Result
// with ctx.Canceled. As with Wait, only the cell's own session (ctx's)
// can cancel it.
func (rt *Runtime) Cancel(ctx context.Context, id string) error {
	c := rt.cell(sessionOf(ctx), id)
	if c == nil {
		return fmt.Errorf("%w: %s", ErrNoCell, id)
	}
	c.cancel()
	return nil
}

// cell finds a cell of a session.
func (rt *Runtime) cell(session, id string) *cell {
	t := &rt.cellTab
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.cells[id]; c != nil && c.session == session {
		return c
	}
	return nil
}

// dropCell forgets a cell (its Result was collected, or it expired).
func (rt *Runtime) dropCell(c *cell) {
	t := &rt.cellTab
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cells[c.id] != c {
		return
	}
	delete(t.cells, c.id)
	if t.count[c.session]--; t.count[c.session] == 0 {
		delete(t.count, c.session)
	}
	c.idle.Stop()
}

// expireCell ends a cell nobody waited for in CellIdleTimeout.
func (rt *Runtime) expireCell(c *cell) {
	c.cancel()
	rt.dropCell(c)
}
