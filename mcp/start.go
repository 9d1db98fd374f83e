package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Unavailable is a configured server that offers no tools because it has
// not connected yet, and why.
type Unavailable struct {
	// Namespace is the server's name, its namespace in the tool tree.
	Namespace string
	// Reason says briefly why, for a model: "its command exited with
	// status 1 before completing the MCP handshake". It is redacted.
	Reason string
	// Err is the last attempt's full error, for a person: with a stdio
	// server's last stderr lines. It is redacted. It is nil while the
	// server is Connecting.
	Err error
	// Connecting is set while the server's first connect is under way
	// (ClientOptions.Background): it has not failed, it has not answered
	// yet. Reason then says how long it has to connect.
	Connecting bool
}

// Unavailable lists, sorted by name, the servers that have not connected
// since Connect: with ClientOptions.Background, the ones still making
// their first attempt (Connecting); with ClientOptions.Lenient, the ones
// that failed and are being retried, and the ones whose config refers to
// a variable that is not set. A server that connected once and later went
// away is not listed: its tools stay, and a call reconnects it.
func (u *Upstreams) Unavailable() []Unavailable {
	var out []Unavailable
	for _, name := range u.names {
		up := u.ups[name]
		up.mu.Lock()
		arrived, err, first := up.arrived, up.lastErr, up.firstTry
		up.mu.Unlock()
		switch {
		case arrived:
		case err != nil:
			out = append(out, Unavailable{Namespace: name, Reason: up.brief(err), Err: err})
		case first:
			out = append(out, Unavailable{Namespace: name, Connecting: true,
				Reason: fmt.Sprintf("still connecting (it has %s to start and list its tools)", u.opts.ConnectTimeout)})
		}
	}
	return out
}

// connectFirst is a background Connect's first connect of a server (its
// dialing channel already set, so that calls wait for it): Changed
// signals its end, arrived or failed, since either changes what
// Unavailable says.
func (up *upstream) connectFirst() {
	up.mu.Lock()
	done := up.dialing
	up.mu.Unlock()
	err := up.connectNow(up.u.ctx)
	up.mu.Lock()
	up.firstTry = false
	up.dialing = nil
	up.mu.Unlock()
	close(done)
	if up.u.ctx.Err() != nil {
		return // closing: not the server's failure
	}
	if err != nil {
		up.startFailed(err)
	} else {
		up.log.Info("the server is available now")
	}
	up.u.signal()
}

// startFailed logs a failed first connect and, unless no retry can fix
// it, retries in the background.
func (up *upstream) startFailed(err error) {
	if up.cfg.problem != nil {
		// The environment will not change while the process runs:
		// there is nothing to retry.
		up.log.Error("the server cannot start; serving the others", "error", err)
		return
	}
	var login *LoginRequiredError
	if errors.As(err, &login) {
		// It is tried again now and then, and at once on a call after
		// the login, which needs no restart.
		up.log.Error("the server needs an OAuth authorization; serving the others: run "+login.Command,
			"reason", login.Reason, "command", login.Command)
		up.u.goBackground(up.retryStart)
		return
	}
	up.log.Error("the server did not start; serving the others and retrying it in the background",
		"error", err, "next_attempt_in", retryDelay(1, maxStartBackoff))
	up.u.goBackground(up.retryStart)
}

// connectNow is Connect's first connect: no backoff, the caller's context.
// A failure starts the backoff, so a lenient Connect's retries and any
// call wait for it. The error is redacted.
func (up *upstream) connectNow(ctx context.Context) error {
	if up.cfg.problem != nil {
		err := up.red().Error(&startError{summary: up.cfg.problem.Error()})
		up.mu.Lock()
		up.lastErr = err
		up.mu.Unlock()
		return err
	}
	cs, tools, raw, sig, err := up.connect(ctx)
	up.mu.Lock()
	defer up.mu.Unlock()
	if err != nil {
		err = up.red().Error(err)
		up.failures++
		up.retryAt = time.Now().Add(retryDelay(up.failures, maxStartBackoff))
		up.lastErr = err
		return err
	}
	up.sess, up.tools, up.raw, up.sig = cs, tools, raw, sig
	up.arrived, up.lastErr = true, nil
	return nil
}

// Backoff ceilings. A server that went away is retried when a call needs
// it, at most every maxReconnectBackoff, so a program finds it again
// soon. One that never started is retried in the background, where nobody
// waits on it: a mistyped npx package would otherwise run npm, and query
// the registry, twice a minute for as long as the process lives.
const (
	maxReconnectBackoff = 30 * time.Second
	maxStartBackoff     = 5 * time.Minute
)

// retryDelay is the wait after the given number of consecutive failures:
// one second, doubling up to ceiling.
func retryDelay(failures int, ceiling time.Duration) time.Duration {
	return min(time.Second<<min(failures-1, 16), ceiling)
}

// retryStart tries again, in the background, a server whose first connect
// failed, until it connects or the Upstreams close. Attempts go through
// session, so one a call starts meanwhile is shared, not doubled.
func (up *upstream) retryStart() {
	// A server waiting for an OAuth login is tried as soon as the login
	// has stored its token, not minutes later.
	var poll <-chan time.Time
	if up.oauth != nil {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		poll = tick.C
	}
	for {
		up.mu.Lock()
		if up.closed || up.sess != nil {
			up.mu.Unlock()
			return
		}
		wait := time.Until(up.retryAt)
		up.mu.Unlock()
		t := time.NewTimer(max(wait, 0))
	wait:
		for {
			select {
			case <-up.u.ctx.Done():
				t.Stop()
				return
			case <-t.C:
				break wait
			case <-poll:
				if up.loggedIn() {
					t.Stop()
					break wait
				}
			}
		}
		_, _ = up.session(up.u.ctx)
	}
}

// startError is a failed connect, explained: a summary a model can read
// ("its command exited with status 1 before completing the MCP
// handshake") and the detail a person needs to fix it.
type startError struct {
	summary string
	err     error    // the underlying error, when the summary does not say it all
	hint    string   // what to try, if anything
	stderr  []string // a stdio server's last stderr lines
}

func (e *startError) Error() string {
	var b strings.Builder
	b.WriteString(e.summary)
	if e.err != nil && e.err.Error() != e.summary {
		b.WriteString(": " + e.err.Error())
	}
	if e.hint != "" {
		b.WriteString("; " + e.hint)
	}
	if len(e.stderr) > 0 {
		b.WriteString("; its stderr ended with: " + strings.Join(e.stderr, " | "))
	}
	return b.String()
}

func (e *startError) Unwrap() error { return e.err }

// startFailure explains why a connect failed, in terms a person can act
// on: a stdio server's exit status and last stderr lines rather than the
// EOF the client saw, or the timeout that ran out. parent is the caller's
// context and ctx the attempt's; doing is what failed ("listing its
// tools").
func (up *upstream) startFailure(parent, ctx context.Context, p *process, doing string, err error) error {
	e := &startError{err: err}
	if p != nil {
		e.stderr = p.stderr.last()
	}
	var rpcErr *jsonrpc.Error
	var login *LoginRequiredError
	switch {
	case parent.Err() != nil:
		return err // the caller gave up; nothing to explain
	case errors.As(err, &login):
		e.summary, e.err = login.Error(), login
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		e.summary = fmt.Sprintf("it did not answer within %s", up.u.opts.ConnectTimeout)
		e.err = nil
		e.hint = "a server that downloads itself when it first starts (npx, uvx, docker) may need a longer connect timeout"
	case p != nil && p.exited == nil:
		e.summary = "its command could not be started: " + err.Error()
		e.err = nil
	case p != nil && p.ended() && !errors.As(err, &rpcErr):
		if how, ok := p.exit(); ok {
			e.summary = fmt.Sprintf("its command %s before %s", how, doing)
		} else {
			e.summary = fmt.Sprintf("its command closed its output before %s", doing)
		}
		e.err = nil
	default:
		if len(e.stderr) == 0 {
			return err
		}
		e.summary, e.err = err.Error(), nil
	}
	return e
}

// brief is the reason in a failed connect's error that a model reads:
// the startError's summary, or the error's first line, redacted and
// within 200 characters.
func (up *upstream) brief(err error) string {
	s := err.Error()
	var se *startError
	if errors.As(err, &se) {
		s = se.summary
	}
	s, _, _ = strings.Cut(up.red().String(s), "\n")
	if len([]rune(s)) > 200 {
		s = string([]rune(s)[:200]) + "…"
	}
	return s
}
