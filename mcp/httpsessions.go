package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultFreshSessionTimeout is how long an HTTP session that has had no
// request since it was initialized lives idle (SessionIdleTimeout, when
// shorter): clients that connect and go, never ending their session, are
// the common case, and a client that means to use its session does so at
// once.
const DefaultFreshSessionTimeout = time.Minute

// refusalInterval is the least time between two log lines about refusals
// of one kind; the next line counts the refusals since.
const refusalInterval = 10 * time.Second

// refusalLog writes at most one warning per refusalInterval, counting the
// refusals it did not write: a client that retries in a loop must not
// fill the disk.
type refusalLog struct {
	mu    sync.Mutex
	last  time.Time
	since int // refusals since the last line, not counting it
}

func (l *refusalLog) warn(log *slog.Logger, msg string, attrs ...any) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < refusalInterval {
		l.since++
		l.mu.Unlock()
		return
	}
	n := l.since
	l.since = 0
	l.last = now
	l.mu.Unlock()
	if n > 0 {
		attrs = append(attrs, "alsoRefusedSinceLastLine", n)
	}
	log.Warn(msg, attrs...)
}

// httpSessions serves an MCP server over streamable HTTP and keeps its
// sessions (the SDK has no cap): at most limit open at once, where one
// more takes the place of the least recently used idle one; an idle
// session closes after idle, or fresh when it has had no request since
// it was initialized. A session is busy — never evicted nor expired —
// while a request of it is being served or busy says so (a run in
// flight, a running cell).
type httpSessions struct {
	srv         *mcpsdk.Server
	h           http.Handler
	rpc         http.Handler // serve behind the JSON-RPC checks (rpcErrors)
	log         *slog.Logger
	limit       int           // 0: none
	idle, fresh time.Duration // 0: never
	busy        func(id string) bool
	onDelete    func(id string)

	mu       sync.Mutex
	sessions map[string]*httpSession
	opening  int // initializations in flight, each holding a place
	refused  refusalLog
}

type httpSession struct {
	id       string
	ss       *mcpsdk.ServerSession // nil until its initialize has been answered
	posts    int                   // POSTs being served
	streams  int                   // GETs (event streams) open
	used     bool                  // has had a request other than initialize and notifications/initialized
	last     time.Time             // when a POST last began or ended
	deadline time.Time             // when it expires, idle; zero: not armed
	timer    *time.Timer
	gone     bool
}

// sessionsHandler serves srv over streamable HTTP with at most
// maxSessions sessions open at once and idle ones closed after idle (the
// ServerOptions conventions: zero means the default, negative none).
// onDelete, when not nil, is told of a session its client ends before
// the SDK ends it; busy, when not nil, reports sessions with work in
// flight outside any request. fresh, when not zero, replaces
// DefaultFreshSessionTimeout (for tests). Call it once per srv.
func sessionsHandler(srv *mcpsdk.Server, log *slog.Logger, maxSessions int, idle, fresh time.Duration, onDelete func(id string), busy func(id string) bool) http.Handler {
	if fresh == 0 {
		fresh = DefaultFreshSessionTimeout
	}
	switch {
	case idle == 0:
		idle = DefaultSessionIdleTimeout
	case idle < 0:
		idle = 0
	}
	limit := maxSessions
	switch {
	case limit == 0:
		limit = DefaultMaxSessions
	case limit < 0:
		limit = 0
	}
	t := &httpSessions{srv: srv, log: log, limit: limit, idle: idle, fresh: min(idle, fresh),
		busy: busy, onDelete: onDelete, sessions: map[string]*httpSession{}}
	// The handler's own timer expires sessions: the SDK's cannot tell an
	// unused session from a used one, nor see runs that outlive their
	// request.
	// An event store makes the event streams resumable (SEP-1699): each
	// event gets an id, a POST's stream opens with a priming event, and a
	// client whose connection drops mid-call reconnects with Last-Event-ID
	// and is sent what it missed, the call's result included. Without one
	// that result is lost. The store is in memory, bounded in total
	// (oldest events go first) and a session's events go with it.
	events := mcpsdk.NewMemoryEventStore(nil)
	events.SetMaxBytes(EventStoreBytes)
	t.h = mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, &mcpsdk.StreamableHTTPOptions{
		Logger:                       log,
		PropagateRequestCancellation: true,
		EventStore:                   events,
	})
	srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			if method != "initialize" && method != "notifications/initialized" {
				if ss, ok := req.GetSession().(*mcpsdk.ServerSession); ok && ss != nil {
					t.markUsed(ss.ID())
				}
			}
			return next(ctx, method, req)
		}
	})
	// Malformed requests get JSON-RPC errors, not the SDK's plain text
	// (wire.go).
	t.rpc = rpcErrors(http.HandlerFunc(t.serve))
	return t
}

func (t *httpSessions) ServeHTTP(w http.ResponseWriter, r *http.Request) { t.rpc.ServeHTTP(w, r) }

// serve is ServeHTTP once the request is well-formed JSON-RPC.
func (t *httpSessions) serve(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	if id != "" {
		e := t.begin(id, r.Method)
		if e == nil {
			// Expired or evicted: the protocol's answer, which tells the
			// client to start a new session.
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		defer t.end(e, r.Method)
		// The SDK ends a deleted session only once its handlers return, and
		// lets them run on: stop the session's runs first. (Session ids are
		// unguessable, so a forged DELETE cannot name one.)
		if r.Method == http.MethodDelete && t.onDelete != nil {
			t.onDelete(id)
		}
		t.h.ServeHTTP(w, r)
		return
	}
	// Only an initialize request opens a session (the SDK opens one for
	// any POST without a session id, but closes it at once unless it was
	// initialized: a probe such as server/discover takes no place).
	if r.Method != http.MethodPost {
		t.h.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	msgID, initialize := initializeRequest(body)
	if !initialize {
		t.h.ServeHTTP(w, r)
		return
	}
	victim, ok := t.reserve()
	if !ok {
		t.refuse(w, r, msgID)
		return
	}
	if victim != nil {
		t.log.Info("closed the least recently used idle HTTP session to open a new one",
			"maxSessions", t.limit, "idleFor", time.Since(victim.last).Round(time.Second), "used", victim.used)
		go t.close(victim)
	}
	rw := &sessionWriter{ResponseWriter: w, t: t}
	t.h.ServeHTTP(rw, r)
	t.opened(rw)
}

// initializeRequest reports whether a POST body is an initialize request,
// and its id.
func initializeRequest(body []byte) (id json.RawMessage, ok bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(bytes.TrimSpace(body), &msg) != nil || msg.Method != "initialize" {
		return nil, false
	}
	return msg.ID, true
}

// begin counts a request of session id, or returns nil for a session the
// handler does not hold.
func (t *httpSessions) begin(id, method string) *httpSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.sessions[id]
	if e == nil {
		return nil
	}
	switch method {
	case http.MethodPost:
		e.posts++
		e.deadline = time.Time{}
		e.last = time.Now()
	case http.MethodGet:
		e.streams++
	}
	return e
}

func (t *httpSessions) end(e *httpSession, method string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch method {
	case http.MethodPost:
		e.posts--
		e.last = time.Now()
		t.arm(e)
	case http.MethodGet:
		e.streams--
	}
}

// arm starts e's idle clock once it has no request in flight.
func (t *httpSessions) arm(e *httpSession) {
	if e.gone || e.posts > 0 || t.idle == 0 {
		return
	}
	d := t.idle
	if !e.used {
		d = t.fresh
	}
	e.deadline = time.Now().Add(d)
	if e.timer == nil {
		e.timer = time.AfterFunc(d, func() { t.expire(e) })
	} else {
		e.timer.Reset(d)
	}
}

// expire closes e if it has been idle until its deadline; a busy session
// gets another idle period.
func (t *httpSessions) expire(e *httpSession) {
	t.mu.Lock()
	if e.gone || e.posts > 0 || e.deadline.IsZero() {
		t.mu.Unlock()
		return
	}
	if left := time.Until(e.deadline); left > 0 {
		e.timer.Reset(left) // re-armed since this timer was set
		t.mu.Unlock()
		return
	}
	if t.busy != nil && t.busy(e.id) {
		e.used = true
		t.arm(e)
		t.mu.Unlock()
		return
	}
	t.removeLocked(e)
	t.mu.Unlock()
	t.log.Debug("closed an idle HTTP session", "used", e.used)
	t.close(e)
}

func (t *httpSessions) markUsed(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.sessions[id]; e != nil {
		e.used = true
	}
}

// reserve holds a place for a session about to open. At the limit it
// takes the place of an idle session, which it returns for the caller to
// close; with every session busy it fails.
func (t *httpSessions) reserve() (victim *httpSession, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.limit > 0 && len(t.sessions)+t.opening >= t.limit {
		victim = t.victimLocked()
		if victim == nil {
			return nil, false
		}
		t.removeLocked(victim)
	}
	t.opening++
	return victim, true
}

// victimLocked picks the session to close for a new one: an idle one —
// no request being served, no run or cell in flight — preferring one
// without an open event stream (whose client is likely gone), then one
// never used, then the least recently used.
func (t *httpSessions) victimLocked() *httpSession {
	var best *httpSession
	rank := func(e *httpSession) (int, int) {
		s, u := 0, 0
		if e.streams > 0 {
			s = 1
		}
		if e.used {
			u = 1
		}
		return s, u
	}
	for _, e := range t.sessions {
		if e.ss == nil || e.posts > 0 || (t.busy != nil && t.busy(e.id)) {
			continue
		}
		if best == nil {
			best = e
			continue
		}
		es, eu := rank(e)
		bs, bu := rank(best)
		if es < bs || (es == bs && (eu < bu || (eu == bu && e.last.Before(best.last)))) {
			best = e
		}
	}
	return best
}

func (t *httpSessions) removeLocked(e *httpSession) {
	if e.gone {
		return
	}
	e.gone = true
	if e.timer != nil {
		e.timer.Stop()
	}
	delete(t.sessions, e.id)
}

// close ends a session the handler let go of; the SDK forgets it, and
// the server frees what it held.
func (t *httpSessions) close(e *httpSession) {
	if t.onDelete != nil {
		t.onDelete(e.id)
	}
	_ = e.ss.Close()
}

// refuse answers a request for a new session with every place taken by a
// busy session: 503, with a JSON-RPC error answering the request (id) as
// the body, for clients that read it.
func (t *httpSessions) refuse(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
	t.refused.warn(t.log, "refused a new HTTP session: every session is busy", "maxSessions", t.limit, "remote", r.RemoteAddr)
	msg := fmt.Sprintf("the server already has its limit of %s open, each with a request or program in flight, "+
		"so none could be closed for this one; retry shortly, or end a session you no longer use (DELETE)", plural(t.limit, "session"))
	var rid any // null when the request had none
	if len(id) > 0 {
		rid = id
	}
	body, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", rid, &jsonrpc.Error{Code: codeServerBusy, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}

// codeServerBusy is the JSON-RPC error code of a refused session: one of
// the codes JSON-RPC leaves to implementations for server errors.
const codeServerBusy = -32000

// retryAfterSeconds is the Retry-After of a refused session: sessions
// stop being busy as their requests end.
const retryAfterSeconds = 5

// opened registers the session the SDK opened for a reserved request,
// if it opened one, and gives the reservation back.
func (t *httpSessions) opened(rw *sessionWriter) {
	t.mu.Lock()
	e := rw.e
	if e == nil {
		t.opening-- // no session: nothing was written, or no id
		t.mu.Unlock()
		return
	}
	ss := e.ss
	t.mu.Unlock()
	if ss == nil {
		ss = sessionByID(t.srv, e.id)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if ss == nil || e.gone {
		// Its initialization failed, and the SDK closed it.
		t.removeLocked(e)
		return
	}
	e.ss = ss
	e.posts--
	e.last = time.Now()
	t.arm(e)
	go func() {
		_ = ss.Wait()
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.sessions[e.id] == e {
			t.removeLocked(e)
		}
	}()
}

// register lists the session the SDK is opening as its answer starts,
// before the client can learn its id, so that its next request finds it.
func (t *httpSessions) register(rw *sessionWriter) {
	id := rw.Header().Get("Mcp-Session-Id")
	if id == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if rw.e != nil {
		return
	}
	// The SDK has connected the session by now.
	e := &httpSession{id: id, ss: sessionByID(t.srv, id), posts: 1, last: time.Now()}
	rw.e = e
	t.sessions[id] = e
	t.opening--
}

// sessionWriter is the ResponseWriter of an initializing request: it
// registers the session when the SDK starts answering.
type sessionWriter struct {
	http.ResponseWriter
	t       *httpSessions
	e       *httpSession // under t.mu
	started bool
}

func (w *sessionWriter) WriteHeader(code int) {
	if !w.started {
		w.started = true
		if code < 300 {
			w.t.register(w)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *sessionWriter) Flush() {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
