package mcp

import (
	"context"
	"math"
	"sync"
	"time"
)

// Defaults for the run-slot queues (ServerOptions.MaxQueuedRuns and
// RunWait).
const (
	// DefaultMaxQueuedRuns is how many execute calls of one session may
	// wait for a run slot at once; one more fails at once.
	DefaultMaxQueuedRuns = 16
	// DefaultRunWait is the longest an execute call waits for a run slot
	// (shorter when Runtime.Timeout is: a call does not wait longer than a
	// run may take).
	DefaultRunWait = 30 * time.Second
)

// usageHalfLife is how fast a session's record of the slot time it used
// fades: a session whose programs ran long yields to the others, but not
// for ever.
const usageHalfLife = time.Minute

// unknownUsage is the slot time a session none of whose runs has ended
// yet counts as having used: until its programs have shown how long they
// take, it yields to sessions whose programs have shown they end quickly,
// and goes before those whose programs ran long.
const unknownUsage = 0.5 // seconds

// heavyUsage is the slot time above which a session is heavy: heavy
// sessions together hold at most max-reserve slots.
const heavyUsage = 1.0 // seconds

// recheckEvery is how often waiting calls are looked at again while a
// slot is free that none of them may take: a session's usage fades, so a
// waiter that may not take one now may a moment later with no run ending
// in between.
const recheckEvery = 250 * time.Millisecond

// runSlots shares MaxRuns run slots fairly among sessions. Each session
// has a FIFO queue of its waiting calls. When a slot frees, it goes to the
// head of the queue of the eligible waiting session that has used the
// least slot time lately (time held, runs in flight included, fading with
// a half-life of usageHalfLife; unknownUsage for a session none of whose
// runs has ended; ties go to the call waiting longest), so sessions whose
// programs are alike take turns, and one whose programs run long — a loop
// that runs to its timeout — waits behind the others rather than they
// behind it. Two rules make a session ineligible:
//
//   - share: it holds max(1, max/2) slots while another session holds or
//     waits for one (alone, it may use them all);
//   - reserve: it is heavy (has used more than heavyUsage lately, runs
//     in flight included) and heavy sessions hold max-reserve slots,
//     reserve being max/4 (at least 1 when max > 1): those slots stay for
//     the other sessions, even when none of them waits at the moment (a
//     client that has just had its answer sends its next call a moment
//     later). A new session is not heavy until its runs have taken that
//     long, so new sessions that all loop can take every slot, once.
//
// Beyond the max slots there are extra ones, max(1, max/4), that only a
// session known to be light may take: one with a run ended and no more
// than heavyUsage used lately, runs in flight included. A running program
// keeps its slot, so without them sessions whose programs end in
// milliseconds would wait a whole run timeout behind new sessions whose
// programs loop; with them they wait for one another only. A light
// session's program that turns into a loop holds an extra slot until
// its timeout, and its session is heavy from then on.
//
// A call waits at most wait, and a session has at most queue calls
// waiting.
type runSlots struct {
	max, share, queue int
	reserve           int           // slots heavy sessions may not take
	extra             int           // slots beyond max for light sessions
	wait              time.Duration // 0: as long as the request lasts

	mu       sync.Mutex
	running  int
	active   int // sessions holding or waiting for a slot
	seq      uint64
	sessions map[string]*slotSession
	recheck  *time.Timer // armed while waiters wait beside a free slot
	// onGrant, when set (tests), learns of each grant, in order, under mu.
	onGrant func(session string)
}

// slotSession is one session's part of the slots.
type slotSession struct {
	name    string
	held    map[*slotWaiter]struct{} // the calls holding a slot
	waiters []*slotWaiter            // in the order they came
	usage   float64                  // slot seconds, faded to at
	at      time.Time
	ran     bool // a run of it has ended
	ended   bool // the session has ended: drop it once it holds nothing
}

type slotWaiter struct {
	ready   chan struct{} // closed when granted
	granted bool          // under runSlots.mu
	seq     uint64
	start   time.Time // when granted
}

// slotRefusal is why a call got no slot, with the numbers to explain it.
type slotRefusal struct {
	reason  slotReason
	waited  time.Duration
	held    int // slots the session held when it gave up
	waiting int // calls of the session waiting, this one included
}

type slotReason int

const (
	slotRequestEnded slotReason = iota // the request's context ended first
	slotWaitBound                      // waited runSlots.wait
	slotQueueFull                      // the session had queue calls waiting already
)

func newRunSlots(maxRuns, queue int, wait time.Duration) *runSlots {
	reserve := 0
	if maxRuns > 1 {
		reserve = max(1, maxRuns/4)
	}
	return &runSlots{max: maxRuns, share: max(1, maxRuns/2), reserve: reserve, extra: max(1, maxRuns/4),
		queue: queue, wait: wait, sessions: map[string]*slotSession{}}
}

// acquire takes a slot for a call of session, waiting its turn. It
// reports how long it waited, or why it got none.
func (r *runSlots) acquire(ctx context.Context, session string) (release func(), waited time.Duration, refused *slotRefusal) {
	r.mu.Lock()
	q := r.session(session)
	now := time.Now()
	if len(q.waiters) == 0 && r.room(q, now) && r.eligible(q, now, r.heavyHeld(now)) {
		w := &slotWaiter{}
		r.grant(q, w, now)
		r.mu.Unlock()
		return r.releaser(session, w), 0, nil
	}
	if r.queue > 0 && len(q.waiters) >= r.queue {
		ref := &slotRefusal{reason: slotQueueFull, held: len(q.held), waiting: len(q.waiters)}
		r.mu.Unlock()
		return nil, 0, ref
	}
	r.seq++
	w := &slotWaiter{ready: make(chan struct{}), seq: r.seq}
	if len(q.waiters) == 0 && len(q.held) == 0 {
		r.active++
	}
	q.waiters = append(q.waiters, w)
	r.dispatch(now) // grants by the rules, or arms the recheck
	r.mu.Unlock()

	var timeout <-chan time.Time
	if r.wait > 0 {
		t := time.NewTimer(r.wait)
		defer t.Stop()
		timeout = t.C
	}
	reason := slotRequestEnded
	select {
	case <-w.ready:
		return r.releaser(session, w), time.Since(now), nil
	case <-ctx.Done():
	case <-timeout:
		reason = slotWaitBound
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.granted {
		if reason == slotWaitBound {
			// Granted as the bound struck: run it.
			return r.releaser(session, w), time.Since(now), nil
		}
		r.releaseLocked(session, w)
	} else {
		q.waiters = deleteWaiter(q.waiters, w)
		if len(q.waiters) == 0 && len(q.held) == 0 {
			r.active--
			if q.ended {
				delete(r.sessions, session)
			}
		}
		// A session's leaving can make another's waiter eligible.
		r.dispatch(time.Now())
	}
	return nil, time.Since(now), &slotRefusal{reason: reason, waited: time.Since(now), held: len(q.held), waiting: len(q.waiters) + 1}
}

// forget drops what is known of a session that has ended; its calls
// have returned by then.
func (r *runSlots) forget(session string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.sessions[session]; q != nil {
		if len(q.held) == 0 && len(q.waiters) == 0 {
			delete(r.sessions, session)
		} else {
			q.ended = true // its last release drops it
		}
	}
}

func (r *runSlots) session(name string) *slotSession {
	q := r.sessions[name]
	if q == nil {
		q = &slotSession{name: name, held: map[*slotWaiter]struct{}{}}
		r.sessions[name] = q
	}
	return q
}

// room reports whether a slot is free for q: one of the max, or for a
// light session one of the extra ones.
func (r *runSlots) room(q *slotSession, now time.Time) bool {
	if r.running < r.max {
		return true
	}
	return r.running < r.max+r.extra && q.ran && !q.heavy(now)
}

// eligible reports whether q may take one more slot now, heavy being
// the slots heavy sessions hold: below its share or alone, and not heavy
// while heavy sessions hold all but the reserve.
func (r *runSlots) eligible(q *slotSession, now time.Time, heavy int) bool {
	if q.heavy(now) && heavy >= r.max-r.reserve {
		return false
	}
	if len(q.held) < r.share {
		return true
	}
	others := r.active
	if len(q.held) > 0 || len(q.waiters) > 0 {
		others--
	}
	return others == 0
}

// use is the slot time q has used lately, its runs in flight included.
func (q *slotSession) use(now time.Time) float64 {
	use := q.faded(now)
	for w := range q.held {
		use += now.Sub(w.start).Seconds()
	}
	if !q.ran {
		use = max(use, unknownUsage)
	}
	return use
}

// heavy reports whether q has used more than heavyUsage lately.
func (q *slotSession) heavy(now time.Time) bool { return q.use(now) > heavyUsage }

// heavyHeld is how many slots heavy sessions hold.
func (r *runSlots) heavyHeld(now time.Time) int {
	n := 0
	for _, q := range r.sessions {
		if len(q.held) > 0 && q.heavy(now) {
			n += len(q.held)
		}
	}
	return n
}

func (r *runSlots) grant(q *slotSession, w *slotWaiter, now time.Time) {
	if len(q.held) == 0 && len(q.waiters) == 0 {
		r.active++
	}
	w.granted = true
	w.start = now
	q.held[w] = struct{}{}
	r.running++
	if r.onGrant != nil {
		r.onGrant(q.name)
	}
	if w.ready != nil {
		close(w.ready)
	}
}

func (r *runSlots) releaser(session string, w *slotWaiter) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.releaseLocked(session, w)
		})
	}
}

func (r *runSlots) releaseLocked(session string, w *slotWaiter) {
	q := r.sessions[session]
	now := time.Now()
	q.usage = q.faded(now) + now.Sub(w.start).Seconds()
	q.at = now
	q.ran = true
	delete(q.held, w)
	r.running--
	if len(q.held) == 0 && len(q.waiters) == 0 {
		r.active--
		if q.ended {
			delete(r.sessions, session)
		}
	}
	r.dispatch(now)
}

// faded is q's usage at now, without its runs in flight.
func (q *slotSession) faded(now time.Time) float64 {
	if q.usage == 0 {
		return 0
	}
	return q.usage * math.Exp2(-now.Sub(q.at).Seconds()/usageHalfLife.Seconds())
}

// dispatch grants free slots to waiters, each to the eligible waiting
// session that has used the least, ties to the call waiting longest.
func (r *runSlots) dispatch(now time.Time) {
	waiting := false
	for r.running < r.max+r.extra {
		heavy := r.heavyHeld(now)
		var best *slotSession
		var bestUse float64
		waiting = false
		for _, q := range r.sessions {
			if len(q.waiters) == 0 {
				continue
			}
			waiting = true
			if !r.room(q, now) || !r.eligible(q, now, heavy) {
				continue
			}
			use := q.use(now)
			if best == nil || use < bestUse || (use == bestUse && q.waiters[0].seq < best.waiters[0].seq) {
				best, bestUse = q, use
			}
		}
		if best == nil {
			break
		}
		w := best.waiters[0]
		r.grant(best, w, now) // before leaving the queue, so active counts it once
		best.waiters = best.waiters[1:]
		if len(best.waiters) == 0 {
			best.waiters = nil
		}
	}
	if waiting && r.running < r.max+r.extra && r.recheck == nil {
		r.recheck = time.AfterFunc(recheckEvery, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.recheck = nil
			r.dispatch(time.Now())
		})
	}
}

func deleteWaiter(ws []*slotWaiter, w *slotWaiter) []*slotWaiter {
	for i, x := range ws {
		if x == w {
			return append(ws[:i:i], ws[i+1:]...)
		}
	}
	return ws
}
