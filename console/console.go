// Package console is a web page for the people who run a cluster: they
// answer the questions runs ask, watch what runs did (the program, its
// tool calls on a time line, its logs and result), follow a cell's lines
// as it prints them and stop it, try programs against the configured
// tools, and see the cluster's processes and drain them.
//
// The pages are rendered on the server (html/template: every name, input
// and line a program or a tool produced is text, never markup) with a
// small script and no inline code: the Content-Security-Policy allows
// scripts and styles from the console itself only. They update live by
// server-sent events.
//
// The console holds no authority of its own. An answer goes through
// cluster.Node.Answer, which takes one answer per question (the first)
// and only for a question a run asks; it is recorded with the name of
// whoever gave it. A program tried here is a run like any other, under
// the workers' policy. State-changing requests need a same-origin
// browser request (http.CrossOriginProtection) and the page's token.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cluster"
)

// Options configure a Console.
type Options struct {
	// Node is the cluster the console shows and acts on. Required.
	Node *cluster.Node
	// Runtime returns the runtime programs are submitted with (the
	// front's, with its current tools): the playground shows its
	// instructions and catalog and runs against it. Nil hides the
	// playground.
	Runtime func() *codemode.Runtime
	// Token, when not empty, is required of every request: as a bearer
	// token (Authorization: Bearer TOKEN), or once on the login page,
	// which then keeps a session cookie. Empty means whoever reaches the
	// console may use it, which is for loopback listeners only (the
	// caller checks Host and Origin there).
	Token string
	// Prefix is the path the console is served under, ending in "/".
	// Empty means "/console/".
	Prefix string
	// TraceURL, when it has "{trace}", links a run's trace id to a
	// tracing UI (say http://localhost:16686/trace/{trace}).
	TraceURL string
	// Logger gets what the console does (answers, drains, stops) and its
	// failures. Nil discards.
	Logger *slog.Logger
}

// A Console is an http.Handler serving the console. Close ends its
// live updates.
type Console struct {
	opts   Options
	node   *cluster.Node
	log    *slog.Logger
	pages  map[string]*template.Template
	mux    *http.ServeMux
	csrf   []byte // the key CSRF tokens are MACs with
	origin *http.CrossOriginProtection
	hub    *hub
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]time.Time // login sessions: id → expiry
}

//go:embed templates/*.html static/*
var files embed.FS

// sessionCookie names the login session; nameCookie the name a person
// answers under.
const (
	sessionCookie = "codemode_console"
	nameCookie    = "codemode_name"
	sessionFor    = 12 * time.Hour
)

// New starts a console: its live updates follow the cluster from now
// until Close.
func New(opts Options) (*Console, error) {
	if opts.Node == nil {
		return nil, errors.New("console: Options.Node is required")
	}
	if opts.Prefix == "" {
		opts.Prefix = "/console/"
	}
	if !strings.HasPrefix(opts.Prefix, "/") || !strings.HasSuffix(opts.Prefix, "/") {
		return nil, errors.New(`console: Options.Prefix must begin and end with "/"`)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{opts: opts, node: opts.Node, log: opts.Logger, sessions: map[string]time.Time{},
		origin: http.NewCrossOriginProtection()}
	c.csrf = make([]byte, 32)
	_, _ = rand.Read(c.csrf)
	var err error
	if c.pages, err = parsePages(); err != nil {
		return nil, err
	}
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.hub = newHub(c.node, c.log)
	c.wg.Go(func() { c.hub.run(c.ctx) })
	c.routes()
	return c, nil
}

// Close ends the console's live updates and waits for its watch to
// stop. Pages still being served end with it.
func (c *Console) Close() error {
	c.stop()
	c.wg.Wait()
	return nil
}

func (c *Console) routes() {
	p := c.opts.Prefix
	m := http.NewServeMux()
	static, _ := fs.Sub(files, "static")
	m.Handle("GET "+p+"static/", http.StripPrefix(p+"static/", http.FileServerFS(static)))
	m.HandleFunc("GET "+p+"login", c.loginPage)
	m.HandleFunc("POST "+p+"login", c.login)
	m.HandleFunc("POST "+p+"logout", c.logout)
	m.HandleFunc("GET "+p+"{$}", c.questionsPage)
	m.HandleFunc("POST "+p+"name", c.setName)
	m.HandleFunc("POST "+p+"runs/{id}/answer", c.answer)
	m.HandleFunc("GET "+p+"runs", c.runsPage)
	m.HandleFunc("GET "+p+"runs/{id}", c.runPage)
	m.HandleFunc("GET "+p+"runs/{id}/lines", c.cellLines)
	m.HandleFunc("POST "+p+"runs/{id}/stop", c.stopCell)
	m.HandleFunc("GET "+p+"cells", c.cellsPage)
	m.HandleFunc("GET "+p+"play", c.playPage)
	m.HandleFunc("POST "+p+"play", c.play)
	m.HandleFunc("GET "+p+"nodes", c.nodesPage)
	m.HandleFunc("POST "+p+"nodes/drain", c.drain)
	m.HandleFunc("GET "+p+"events", c.events)
	c.mux = m
}

// ServeHTTP serves the console's pages.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	p := c.opts.Prefix
	public := r.URL.Path == p+"login" || strings.HasPrefix(r.URL.Path, p+"static/")
	sid, authed := c.authenticated(r)
	if !public && !authed {
		if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
			http.Redirect(w, r, p+"login", http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="codemode"`)
		http.Error(w, "Unauthorized: log in to the console, or send Authorization: Bearer TOKEN", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := c.origin.Check(r); err != nil {
			http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
		if r.URL.Path != p+"login" && !c.csrfOK(r, sid) {
			http.Error(w, "Forbidden: the form's token is missing or stale; reload the page and try again", http.StatusForbidden)
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}

// authenticated reports whether r may use the console, and its login
// session's id (empty without one).
func (c *Console) authenticated(r *http.Request) (string, bool) {
	if c.opts.Token == "" {
		return "", true
	}
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		if equalSecret(strings.TrimSpace(tok), c.opts.Token) {
			return "", true
		}
	}
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.sessions[ck.Value]
	if !ok || time.Now().After(exp) {
		delete(c.sessions, ck.Value)
		return "", false
	}
	return ck.Value, true
}

// equalSecret compares two secrets in constant time, whatever their
// lengths.
func equalSecret(a, b string) bool {
	x, y := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

// csrfToken is the token forms carry: a MAC of the login session (or of
// nothing, without a token) under a key made at start.
func (c *Console) csrfToken(sid string) string {
	m := hmac.New(sha256.New, c.csrf)
	m.Write([]byte("csrf\x00" + sid))
	return hex.EncodeToString(m.Sum(nil))
}

func (c *Console) csrfOK(r *http.Request, sid string) bool {
	got := r.Header.Get("X-Codemode-Csrf")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return hmac.Equal([]byte(got), []byte(c.csrfToken(sid)))
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.opts.Token == "" {
		http.Redirect(w, r, c.opts.Prefix, http.StatusSeeOther)
		return
	}
	c.render(w, r, "login", "Log in", map[string]any{"Failed": r.URL.Query().Has("failed")})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.opts.Token == "" || !equalSecret(r.PostFormValue("token"), c.opts.Token) {
		time.Sleep(200 * time.Millisecond) // a guess costs time
		http.Redirect(w, r, c.opts.Prefix+"login?failed", http.StatusSeeOther)
		return
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	sid := hex.EncodeToString(b)
	c.mu.Lock()
	now := time.Now()
	for k, exp := range c.sessions {
		if now.After(exp) {
			delete(c.sessions, k)
		}
	}
	c.sessions[sid] = now.Add(sessionFor)
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: c.opts.Prefix, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: int(sessionFor / time.Second)})
	c.log.Info("console login", "from", r.RemoteAddr)
	http.Redirect(w, r, c.opts.Prefix, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.mu.Lock()
		delete(c.sessions, ck.Value)
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: c.opts.Prefix, MaxAge: -1, HttpOnly: true})
	http.Redirect(w, r, c.opts.Prefix+"login", http.StatusSeeOther)
}
