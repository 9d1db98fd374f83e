package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cluster"
)

var (
	testKey     = []byte("0123456789abcdef0123456789abcdef")
	engineCache = filepath.Join(os.TempDir(), "codemode-console-test-cache")
)

// hostile is a tool name, input and log line made to be markup: the
// console must show each as text.
const hostile = `<img src=x onerror="window.__pwned=1">`

// fixture is a one-machine cluster (an embedded server, a worker) with a
// console in front, on a loopback test server.
type fixture struct {
	node    *cluster.Node
	rt      *codemode.Runtime
	con     *Console
	srv     *httptest.Server
	refunds atomic.Int64
}

type refundIn struct {
	Order  string `json:"order"`
	Reason string `json:"reason,omitempty"`
}

func must(t codemode.Tool, err error) codemode.Tool {
	if err != nil {
		panic(err)
	}
	return t
}

func tools(f *fixture) codemode.Tools {
	list := must(codemode.NewTool("List orders.", func(ctx context.Context, _ struct{}) ([]string, error) {
		return []string{"o-1", "o-2", "o-3"}, nil
	}))
	list.Annotations = &codemode.Annotations{ReadOnly: true}
	refund := must(codemode.NewTool("Refund an order: a person approves it.", func(ctx context.Context, in refundIn) (map[string]string, error) {
		f.refunds.Add(1)
		return map[string]string{"refunded": in.Order}, nil
	}))
	sleep := must(codemode.NewTool("Wait ms milliseconds.", func(ctx context.Context, in struct {
		Ms int `json:"ms"`
	}) (bool, error) {
		select {
		case <-time.After(time.Duration(in.Ms) * time.Millisecond):
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}))
	sleep.Annotations = &codemode.Annotations{ReadOnly: true}
	echo := must(codemode.NewTool("Echo.", func(ctx context.Context, in map[string]any) (map[string]any, error) { return in, nil }))
	echo.Annotations = &codemode.Annotations{ReadOnly: true}
	return codemode.Tools{
		"shop":  codemode.Tools{"list": list, "refund": refund},
		"clock": codemode.Tools{"sleep": sleep},
		"evil":  codemode.Tools{hostile: echo},
	}
}

// newFixture starts the cluster, a worker whose policy allows reads and
// asks about everything else, and the console (with token, if given).
func newFixture(t testing.TB, token string) *fixture {
	t.Helper()
	f := &fixture{}
	ctx := context.Background()
	n, err := cluster.Open(ctx, cluster.Config{DataDir: t.TempDir(), Front: true, Name: "console-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	f.node = n
	tl := tools(f)
	opts := codemode.Options{Tools: tl, Timeout: 60 * time.Second, StateKey: testKey, CacheDir: engineCache,
		Policy: codemode.Rules{ReadOnly: codemode.Allow, Default: codemode.Ask}.Policy()}
	w, err := cluster.NewWorker(n, opts, cluster.WorkerOptions{MaxRuns: 8,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	t.Cleanup(func() { cancel(); <-done; w.Close() })
	f.rt, err = codemode.New(codemode.Options{Tools: tl, StateKey: testKey, CacheDir: engineCache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.rt.Close() })
	f.con, err = New(Options{Node: n, Runtime: func() *codemode.Runtime { return f.rt }, Token: token,
		TraceURL: "http://traces.example/trace/{trace}"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.con.Close() })
	f.srv = httptest.NewServer(f.con)
	t.Cleanup(f.srv.Close)
	return f
}

// submit starts a run of code in session "test" and returns its id.
func (f *fixture) submit(t testing.TB, code string) string {
	t.Helper()
	id, err := f.node.Submit(codemode.WithSession(context.Background(), "test"), f.rt, code)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitFor polls cond until it holds (or fails the test after a minute).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// status waits until run id is in one of the statuses, and returns it.
func (f *fixture) status(t testing.TB, id string, want ...string) cluster.RunInfo {
	t.Helper()
	var ri cluster.RunInfo
	waitFor(t, fmt.Sprintf("run %s to be %v", id, want), func() bool {
		var err error
		ri, err = f.node.Run(context.Background(), id)
		if err != nil {
			return false
		}
		for _, s := range want {
			if ri.Status == s {
				return true
			}
		}
		return false
	})
	return ri
}

// client is a browser-like HTTP client of the console: cookies, and the
// page's CSRF token.
type client struct {
	t    testing.TB
	f    *fixture
	http *http.Client
	csrf string
}

func (f *fixture) client(t testing.TB) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, f: f, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

var csrfMeta = regexp.MustCompile(`name="codemode-csrf" content="([0-9a-f]+)"`)

func (c *client) get(path string) (int, string) {
	c.t.Helper()
	res, err := c.http.Get(c.f.srv.URL + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if m := csrfMeta.FindSubmatch(b); m != nil {
		c.csrf = string(m[1])
	}
	return res.StatusCode, string(b)
}

// post sends a same-origin form (as a browser does: Origin and
// Sec-Fetch-Site), with the page's token unless form sets csrf.
func (c *client) post(path string, form url.Values, headers ...string) (int, string) {
	c.t.Helper()
	if !form.Has("csrf") {
		form.Set("csrf", c.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, c.f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.f.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location") + string(b)
}

const asksRefund = `const orders = await tools.shop.list({});
console.log("orders", orders.length);
const r = await tools.shop.refund({ order: orders[0], reason: "damaged" });
return r;`

func TestAnswerFromTheConsole(t *testing.T) {
	f := newFixture(t, "")
	c := f.client(t)
	id := f.submit(t, asksRefund)
	f.status(t, id, cluster.StatusParked)

	_, page := c.get("/console/")
	if !strings.Contains(page, id) || !strings.Contains(page, "shop.refund") || !strings.Contains(page, "&#34;damaged&#34;") {
		t.Fatalf("the questions page does not show the run's question:\n%s", page)
	}
	// No name, no answer: the record must say who answered.
	if code, loc := c.post("/console/runs/"+id+"/answer", url.Values{"step": {"1"}, "all": {"allow"}}); code != http.StatusSeeOther || !strings.Contains(loc, "error=") {
		t.Fatalf("an answer without a name: %d %s", code, loc)
	}
	c.post("/console/name", url.Values{"name": {"Ada\u202e Lovelace"}})
	code, loc := c.post("/console/runs/"+id+"/answer", url.Values{"step": {"1"}, "all": {"allow"}, "reason": {"fine"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "flash=") {
		t.Fatalf("answer: %d %s", code, loc)
	}
	ri := f.status(t, id, cluster.StatusDone)
	if !ri.Result.OK || f.refunds.Load() != 1 {
		t.Fatalf("the approved run: %+v, %d refunds", ri.Result, f.refunds.Load())
	}
	if len(ri.Answers) != 1 || !ri.Answers[0].Allow || ri.Answers[0].By != "Ada Lovelace (console, 127.0.0.1)" || ri.Answers[0].Reason != "fine" {
		t.Fatalf("the record of the answer: %+v", ri.Answers)
	}
	// A second answer to the same step is refused, naming the first.
	code, loc = c.post("/console/runs/"+id+"/answer", url.Values{"step": {"1"}, "all": {"deny"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "answered+already") || !strings.Contains(loc, "Ada+Lovelace") {
		t.Fatalf("a late answer: %d %s", code, loc)
	}
	_, page = c.get("/console/runs/" + id)
	for _, want := range []string{"Ada Lovelace (console, 127.0.0.1)", `class="call ok"`, "shop.refund", "&#34;refunded&#34;: &#34;o-1&#34;", "orders 3"} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
}

// TestConcurrentAnswers: many people answer one question at once; one
// answer is taken, and the others are told whose.
func TestConcurrentAnswers(t *testing.T) {
	f := newFixture(t, "")
	id := f.submit(t, asksRefund)
	f.status(t, id, cluster.StatusParked)
	const people = 8
	var wg sync.WaitGroup
	results := make([]string, people)
	for i := range people {
		c := f.client(t)
		c.get("/console/")
		c.post("/console/name", url.Values{"name": {fmt.Sprintf("person %d", i)}})
		verdict := []string{"allow", "deny"}[i%2]
		wg.Go(func() {
			_, results[i] = c.post("/console/runs/"+id+"/answer", url.Values{"step": {"1"}, "all": {verdict}})
		})
	}
	wg.Wait()
	won := 0
	for _, r := range results {
		if strings.Contains(r, "flash=Answered") {
			won++
		} else if !strings.Contains(r, "answered+already") && !strings.Contains(r, "not+waiting") {
			t.Errorf("a losing answer was told: %s", r)
		}
	}
	if won != 1 {
		t.Fatalf("%d answers were taken, want 1: %q", won, results)
	}
	ri := f.status(t, id, cluster.StatusDone)
	if len(ri.Answers) != 1 {
		t.Fatalf("answers recorded: %+v", ri.Answers)
	}
	if got := f.refunds.Load(); (got == 1) != ri.Answers[0].Allow {
		t.Fatalf("%d refunds after the answer %+v", got, ri.Answers[0])
	}
}

// TestConsoleOnlyAnswersWhatIsAsked: the console cannot answer a step a
// run is not at, a run that is not parked, or a call it did not ask
// about; and it cannot approve part of a step.
func TestConsoleOnlyAnswersWhatIsAsked(t *testing.T) {
	f := newFixture(t, "")
	c := f.client(t)
	c.get("/console/")
	c.post("/console/name", url.Values{"name": {"Eve"}})
	id := f.submit(t, `const a = tools.shop.refund({ order: "o-1" }); const b = tools.shop.refund({ order: "o-2" });
return await Promise.all([a, b]);`)
	ri := f.status(t, id, cluster.StatusParked)
	if len(ri.Questions) != 2 {
		t.Fatalf("questions: %+v", ri.Questions)
	}
	cases := []url.Values{
		{"step": {"2"}, "all": {"allow"}},                     // a step it is not at
		{"step": {"0"}, "all": {"allow"}},                     // a step before
		{"step": {"1"}, "d0": {"allow"}},                      // one of two calls
		{"step": {"1"}, "d0": {"allow"}, "d1": {"maybe"}},     // not a verdict
		{"step": {"1"}, "d0": {"allow"}, "d7": {"allow"}},     // a call it does not ask about
		{"step": {"x"}, "all": {"allow"}},                     // no step
		{"step": {"1"}, "all": {"allow"}, "csrf": {"bad"}},    // a forged form
		{"step": {"1"}, "all": {"allow"}, "csrf": {""}},       // no token
		{"step": {"1"}, "all": {"ask"}},                       // not a verdict either
		{"step": {"1"}, "all": {"allow"}, "back": {"//evil"}}, // an open redirect
	}
	for _, form := range cases {
		code, loc := c.post("/console/runs/"+id+"/answer", form)
		if form.Get("back") == "//evil" {
			// The answer is taken; the redirect stays on the console.
			if !strings.HasPrefix(loc, "/console/") {
				t.Fatalf("redirected to %q", loc)
			}
			continue
		}
		if code == http.StatusSeeOther && strings.Contains(loc, "flash=") {
			t.Fatalf("the answer %v was taken: %s", form, loc)
		}
	}
	ri = f.status(t, id, cluster.StatusDone)
	if len(ri.Answers) != 2 || !ri.Answers[0].Allow || !ri.Answers[1].Allow || f.refunds.Load() != 2 {
		t.Fatalf("after the one valid answer: %+v, %d refunds", ri.Answers, f.refunds.Load())
	}
	// A finished run, an unknown one, a malformed id.
	for _, run := range []string{id, "0123456789abcdef0123456789abcdef", "../../etc", "%00"} {
		code, loc := c.post("/console/runs/"+run+"/answer", url.Values{"step": {"1"}, "all": {"allow"}})
		if strings.Contains(loc, "flash=") {
			t.Fatalf("run %q: answered (%d %s)", run, code, loc)
		}
	}
}

func TestCrossOriginRefused(t *testing.T) {
	f := newFixture(t, "")
	c := f.client(t)
	c.get("/console/")
	c.post("/console/name", url.Values{"name": {"Ada"}})
	id := f.submit(t, asksRefund)
	f.status(t, id, cluster.StatusParked)
	// Another site's page posting the form (the browser says so).
	code, _ := c.post("/console/runs/"+id+"/answer", url.Values{"step": {"1"}, "all": {"allow"}},
		"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
	if code != http.StatusForbidden {
		t.Fatalf("a cross-site form post: %d", code)
	}
	code, _ = c.post("/console/play", url.Values{"code": {"return 1"}}, "Sec-Fetch-Site", "cross-site")
	if code != http.StatusForbidden {
		t.Fatalf("a cross-site playground post: %d", code)
	}
	if ri, _ := f.node.Run(context.Background(), id); ri.Status != cluster.StatusParked {
		t.Fatalf("the run moved on: %s", ri.Status)
	}
	// Every page refuses to be framed, and runs no inline script.
	res, err := http.Get(f.srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("CSP: %q", csp)
	}
}

func TestToken(t *testing.T) {
	const token = "s3cret-token-0123456789"
	f := newFixture(t, token)
	c := f.client(t)
	// Without the token: pages send the browser to log in, the rest is
	// refused.
	code, body := c.get("/console/")
	if code != http.StatusSeeOther {
		t.Fatalf("a page without the token: %d %s", code, body)
	}
	for _, p := range []string{"/console/events", "/console/runs/0123456789abcdef0123456789abcdef/lines"} {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+p, nil)
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s without the token: %d", p, res.StatusCode)
		}
	}
	if code, _ := c.post("/console/play", url.Values{"code": {"return 1"}}); code != http.StatusUnauthorized {
		t.Fatalf("a post without the token: %d", code)
	}
	// The static files are public (the login page needs them).
	if code, _ := c.get("/console/static/console.css"); code != http.StatusOK {
		t.Fatalf("static: %d", code)
	}
	// A wrong token, then the right one: a session cookie.
	if _, loc := c.post("/console/login", url.Values{"token": {"wrong"}}); !strings.Contains(loc, "failed") {
		t.Fatalf("a wrong token: %s", loc)
	}
	if code, _ := c.get("/console/"); code != http.StatusSeeOther {
		t.Fatal("a wrong token logged in")
	}
	c.post("/console/login", url.Values{"token": {token}})
	if code, body := c.get("/console/"); code != http.StatusOK || !strings.Contains(body, "Questions") {
		t.Fatalf("after logging in: %d", code)
	}
	// The session's CSRF token is not another session's.
	other := f.client(t)
	other.post("/console/login", url.Values{"token": {token}})
	other.get("/console/")
	if other.csrf == c.csrf {
		t.Fatal("two sessions have one CSRF token")
	}
	other.csrf = c.csrf
	if code, _ := other.post("/console/play", url.Values{"code": {"return 1"}}); code != http.StatusForbidden {
		t.Fatalf("another session's CSRF token: %d", code)
	}
	// A bearer token works without a session (scripts, curl).
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/console/runs", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("bearer: %d", res.StatusCode)
	}
	// Logging out ends the session.
	c.post("/console/logout", url.Values{})
	if code, _ := c.get("/console/"); code != http.StatusSeeOther {
		t.Fatalf("after logging out: %d", code)
	}
}

// TestHostileContentIsText: a tool name, an input and a log line that
// are markup are shown escaped on every page.
func TestHostileContentIsText(t *testing.T) {
	f := newFixture(t, "")
	c := f.client(t)
	c.get("/console/")
	c.post("/console/name", url.Values{"name": {`<script>alert(1)</script>`}})
	code := fmt.Sprintf(`console.log(%q);
await tools.evil[%q]({ x: %q });
await tools.shop.refund({ order: %q });
return %q;`, hostile, hostile, hostile, hostile, hostile)
	id := f.submit(t, code)
	f.status(t, id, cluster.StatusParked)
	pages := []string{"/console/", "/console/runs", "/console/runs/" + id, "/console/play"}
	check := func() {
		for _, p := range pages {
			_, body := c.get(p)
			if strings.Contains(body, "<img") || strings.Contains(body, "<script>alert") {
				t.Fatalf("%s has the hostile markup unescaped", p)
			}
		}
	}
	check()
	if _, body := c.get("/console/"); !strings.Contains(body, "&lt;img src=x") {
		t.Fatal("the hostile text is not shown at all")
	}
	c.post("/console/runs/"+id+"/answer", url.Values{"step": {"1"}, "all": {"deny"}, "reason": {hostile}})
	ri := f.status(t, id, cluster.StatusDone)
	// The name is kept as given (it has no invisible characters), and
	// shown as text like everything else.
	if ri.Answers[0].By != "<script>alert(1)</script> (console, 127.0.0.1)" {
		t.Fatalf("by: %q", ri.Answers[0].By)
	}
	if _, body := c.get("/console/runs/" + id); !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt; (console") {
		t.Fatal("the run page does not show who answered")
	}
	check()
}

func TestPlayground(t *testing.T) {
	f := newFixture(t, "")
	c := f.client(t)
	_, body := c.get("/console/play")
	for _, want := range []string{"tools.shop.refund", "shop.list", "Playground"} {
		if !strings.Contains(body, want) {
			t.Errorf("the playground lacks %q", want)
		}
	}
	code, loc := c.post("/console/play", url.Values{"code": {`const o = await tools.shop.list({}); return o.length * 2;`}})
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/runs/") {
		t.Fatalf("play: %d %s", code, loc)
	}
	id := strings.TrimPrefix(loc, "/console/runs/")
	ri := f.status(t, id, cluster.StatusDone)
	if string(ri.Result.Value) != "6" || ri.Session != "console" {
		t.Fatalf("the playground's run: %+v", ri)
	}
	// Nothing, or too much.
	for _, prog := range []string{"", "   ", strings.Repeat("x", maxPlayBytes+1)} {
		if _, loc := c.post("/console/play", url.Values{"code": {prog}}); !strings.Contains(loc, "error=") {
			t.Fatalf("a program of %d bytes: %s", len(prog), loc)
		}
	}
	// The policy applies: a refund from the playground waits for an answer.
	_, loc = c.post("/console/play", url.Values{"code": {asksRefund}})
	f.status(t, strings.TrimPrefix(loc, "/console/runs/"), cluster.StatusParked)
	if f.refunds.Load() != 0 {
		t.Fatal("the playground's refund was made without an answer")
	}
}

func TestEventsStream(t *testing.T) {
	f := newFixture(t, "")
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/console/events", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	waitFor(t, "the console's first reading", func() bool { _, ready, _ := f.con.hub.counts(); return ready })
	id := f.submit(t, asksRefund)
	// The stream names the run, and that it asks.
	buf := make([]byte, 64<<10)
	var got strings.Builder
	for !strings.Contains(got.String(), `"kind":"asking"`) {
		n, err := res.Body.Read(buf)
		if err != nil {
			t.Fatalf("the stream ended: %v (%s)", err, got.String())
		}
		got.Write(buf[:n])
	}
	var seen bool
	for _, line := range strings.Split(got.String(), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var cs []change
			if json.Unmarshal([]byte(data), &cs) == nil {
				for _, ch := range cs {
					seen = seen || ch.ID == id
				}
			}
		}
	}
	if !seen {
		t.Fatalf("the stream never named run %s:\n%s", id, got.String())
	}
}
