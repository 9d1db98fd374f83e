package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cluster"
)

// page is what every page's layout gets.
type page struct {
	Title  string
	Nav    string // the nav entry to mark
	Prefix string
	CSRF   string
	Name   string // who the person answers as
	Login  bool   // a login session (shows Log out)
	Flash  string
	Error  string
	Body   any
}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"ago":      ago,
		"duration": duration,
		"json":     prettyJSON,
		"short":    func(id string) string { return id[:min(len(id), 12)] },
		"add":      func(a, b int) int { return a + b },
		"stamp":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") },
	}
	layout, err := template.New("layout").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		base := strings.TrimSuffix(path.Base(name), ".html")
		if base == "layout" || base == "parts" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(files, name)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		pages[base] = t
	}
	return pages, nil
}

// render writes page name in the layout, or only its "content" part for
// a request that asks for a fragment (?fragment), which the script swaps
// into an open page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, name, title string, body any) {
	c.renderAs(w, r, name, name, title, body)
}

// renderAs is render with the nav entry (and page kind) named apart from
// the template: the cells' list is the runs' page.
func (c *Console) renderAs(w http.ResponseWriter, r *http.Request, name, nav, title string, body any) {
	sid, _ := c.authenticated(r)
	p := page{Title: title, Nav: nav, Prefix: c.opts.Prefix, CSRF: c.csrfToken(sid), Name: nameOf(r), Login: sid != "",
		Flash: r.URL.Query().Get("flash"), Error: r.URL.Query().Get("error"), Body: body}
	t := c.pages[name]
	var buf bytes.Buffer
	tmpl := "layout"
	if r.URL.Query().Has("fragment") {
		tmpl = "content"
	}
	if err := t.ExecuteTemplate(&buf, tmpl, p); err != nil {
		c.log.Error("rendering a console page", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = buf.WriteTo(w)
}

// back redirects to the page the form was on (a path of the console
// only), with a message for it.
func (c *Console) back(w http.ResponseWriter, r *http.Request, to, key, msg string) {
	if to == "" {
		to = r.PostFormValue("back")
	}
	u, err := url.Parse(to)
	if err != nil || u.IsAbs() || u.Host != "" || !strings.HasPrefix(u.Path, c.opts.Prefix) || strings.Contains(u.Path, "//") {
		u = &url.URL{Path: c.opts.Prefix}
	}
	q := url.Values{}
	if msg != "" {
		q.Set(key, msg)
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// nameOf is the name the person gave (the name cookie), or "".
func nameOf(r *http.Request) string {
	ck, err := r.Cookie(nameCookie)
	if err != nil {
		return ""
	}
	v, err := url.QueryUnescape(ck.Value)
	if err != nil {
		return ""
	}
	return cleanName(v)
}

// maxNameRunes bounds the name a person answers as.
const maxNameRunes = 64

// cleanName keeps a name to letters, marks, numbers, punctuation, symbols
// and plain spaces: nothing that displays as nothing or reorders text.
func cleanName(s string) string {
	if !utf8.ValidString(s) {
		return ""
	}
	var b strings.Builder
	n := 0
	for _, r := range strings.TrimSpace(s) {
		if n == maxNameRunes {
			break
		}
		if r == ' ' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S) && !unicode.Is(unicode.Co, r) {
			b.WriteRune(r)
			n++
		}
	}
	return strings.TrimSpace(b.String())
}

func (c *Console) setName(w http.ResponseWriter, r *http.Request) {
	name := cleanName(r.PostFormValue("name"))
	http.SetCookie(w, &http.Cookie{Name: nameCookie, Value: url.QueryEscape(name), Path: c.opts.Prefix, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: 365 * 24 * 3600})
	c.back(w, r, "", "flash", "")
}

// ---- Questions.

type questionsBody struct {
	Questions []questionView
	Failed    string
}

type questionView struct {
	Prefix, CSRF string
	Run          cluster.RunInfo
	Calls        []callView
	Code         []codeLine
	Audit        *timeline
}

type callView struct {
	codemode.PendingCall
	Shown string
	Line  int
}

type codeLine struct {
	N      int
	Text   string
	Marked bool
}

func (c *Console) questions(ctx context.Context, csrf string) questionsBody {
	qs, err := c.node.Questions(ctx)
	var b questionsBody
	if err != nil {
		b.Failed = err.Error()
	}
	for _, q := range qs {
		v := c.question(q, csrf)
		b.Questions = append(b.Questions, v)
	}
	return b
}

// question is a parked run as the questions' form shows it.
func (c *Console) question(q cluster.RunInfo, csrf string) questionView {
	v := questionView{Prefix: c.opts.Prefix, CSRF: csrf, Run: q}
	marked := map[int]bool{}
	for _, pc := range q.Questions {
		cv := callView{PendingCall: pc, Shown: string(pc.Shown()), Line: callLine(pc)}
		marked[cv.Line] = true
		v.Calls = append(v.Calls, cv)
	}
	v.Code = codeLines(q.Code, marked)
	if q.Progress != nil {
		v.Audit = newTimeline(q.Progress.ToolCalls)
	}
	return v
}

func (c *Console) questionsPage(w http.ResponseWriter, r *http.Request) {
	sid, _ := c.authenticated(r)
	c.render(w, r, "questions", "Questions", c.questions(r.Context(), c.csrfToken(sid)))
}

func codeLines(code string, marked map[int]bool) []codeLine {
	var out []codeLine
	for i, l := range strings.Split(code, "\n") {
		out = append(out, codeLine{N: i + 1, Text: l, Marked: marked[i+1]})
	}
	return out
}

// answer takes a person's answers to a run's questions at a step: one
// per call asked about (d<index> = allow or deny), with a message.
func (c *Console) answer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	name := nameOf(r)
	if name == "" {
		c.back(w, r, "", "error", "Give your name first (at the top of the page): the record of the run says who answered.")
		return
	}
	step, err := strconv.Atoi(r.PostFormValue("step"))
	if err != nil {
		c.back(w, r, "", "error", "The form names no step: reload the page.")
		return
	}
	ri, err := c.node.Run(r.Context(), id)
	if err != nil {
		c.back(w, r, "", "error", "No such run: "+err.Error())
		return
	}
	if ri.Status != cluster.StatusParked || ri.Step != step {
		c.back(w, r, "", "error", answeredAlready(ri, step))
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if len(reason) > 2000 {
		// Cut at a character, not inside one.
		reason = strings.ToValidUTF8(reason[:2000], "")
	}
	by := name + " (console, " + hostOf(r.RemoteAddr) + ")"
	answers := map[int]codemode.Decision{}
	all := r.PostFormValue("all") // one button for every call
	for _, q := range ri.Questions {
		v := cmp.Or(all, r.PostFormValue("d"+strconv.Itoa(q.Index)))
		switch v {
		case "allow":
			answers[q.Index] = codemode.Decision{Verdict: codemode.Allow, Reason: reason, By: by}
		case "deny":
			answers[q.Index] = codemode.Decision{Verdict: codemode.Deny, Reason: cmp.Or(reason, "denied by "+name), By: by}
		default:
			c.back(w, r, "", "error", fmt.Sprintf("Answer every call: call %d (%s) has no answer.", q.Index, q.Name))
			return
		}
	}
	err = c.node.Answer(r.Context(), id, step, answers)
	switch {
	case errors.Is(err, cluster.ErrAnswered):
		if now, rerr := c.node.Run(r.Context(), id); rerr == nil {
			ri = now
		}
		c.back(w, r, "", "error", answeredAlready(ri, step))
		return
	case err != nil:
		c.back(w, r, "", "error", "The answer was not taken: "+err.Error())
		return
	}
	verdicts := make([]string, 0, len(answers))
	for _, q := range ri.Questions {
		verdicts = append(verdicts, fmt.Sprintf("%s %s", q.Name, answers[q.Index].Verdict))
	}
	c.log.Info("a question was answered in the console", "run", id, "step", step, "by", by, "answers", strings.Join(verdicts, ", "))
	c.back(w, r, "", "flash", fmt.Sprintf("Answered run %s: %s.", id[:12], strings.Join(verdicts, ", ")))
}

// answeredAlready says who answered a run's questions at step, for a
// person whose answer came second.
func answeredAlready(ri cluster.RunInfo, step int) string {
	var who []string
	for _, a := range ri.Answers {
		if a.Step == step {
			v := "denied"
			if a.Allow {
				v = "allowed"
			}
			who = append(who, fmt.Sprintf("%s %s %s", cmp.Or(a.By, "someone"), v, a.Name))
		}
	}
	if len(who) == 0 {
		return fmt.Sprintf("Run %s is not waiting for these answers any more (it is %s).", shortID(ri.ID), ri.Status)
	}
	return fmt.Sprintf("Run %s was answered already: %s.", shortID(ri.ID), strings.Join(who, "; "))
}

func shortID(id string) string { return id[:min(12, len(id))] }

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// ---- Runs.

type runsBody struct {
	Runs   []runRow
	Cells  bool
	Total  int
	Ready  bool
	Failed string
}

type runRow struct {
	cluster.RunInfo
	Calls    int
	Outcome  string // ok, an error kind, or the status
	Duration time.Duration
	First    string // the program's first line
}

func row(ri cluster.RunInfo) runRow {
	rr := runRow{RunInfo: ri, Outcome: ri.Status}
	switch {
	case ri.Result != nil:
		rr.Calls = len(ri.Result.ToolCalls)
		rr.Outcome = "ok"
		if ri.Result.Error != nil {
			rr.Outcome = string(ri.Result.Error.Kind)
		}
		if !ri.Created.IsZero() {
			rr.Duration = ri.Updated.Sub(ri.Created)
		}
	case ri.Progress != nil:
		rr.Calls = len(ri.Progress.ToolCalls)
	}
	if rr.Duration == 0 && !ri.Created.IsZero() && ri.Result == nil {
		rr.Duration = time.Since(ri.Created)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(ri.Code), "\n")
	if utf8.RuneCountInString(first) > 80 {
		first = string([]rune(first)[:80]) + "…"
	}
	rr.First = first
	return rr
}

// maxListed is how many runs a list shows.
const maxListed = 100

func (c *Console) list(ctx context.Context, cells bool) runsBody {
	n, ready, failed := c.hub.counts()
	b := runsBody{Cells: cells, Total: n, Ready: ready}
	if failed != nil {
		b.Failed = failed.Error()
	}
	for _, id := range c.hub.recent(maxListed, cells) {
		ri, err := c.node.Run(ctx, id)
		if err != nil {
			continue
		}
		b.Runs = append(b.Runs, row(ri))
	}
	return b
}

func (c *Console) runsPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "runs", "Runs", c.list(r.Context(), false))
}

func (c *Console) cellsPage(w http.ResponseWriter, r *http.Request) {
	c.renderAs(w, r, "runs", "cells", "Cells", c.list(r.Context(), true))
}

type runBody struct {
	Run      cluster.RunInfo
	Row      runRow
	Code     []codeLine
	Question *questionView
	Timeline *timeline
	Result   *codemode.Result
	Value    string
	TraceURL string
	Live     bool // not finished: the page follows it
}

func (c *Console) runPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ri, err := c.node.Run(r.Context(), id)
	if err != nil {
		if errors.Is(err, cluster.ErrUnknownRun) {
			http.Error(w, "No such run (it never existed, or its record expired).", http.StatusNotFound)
			return
		}
		http.Error(w, "The run's record cannot be read: "+err.Error(), http.StatusBadGateway)
		return
	}
	b := runBody{Run: ri, Row: row(ri), Live: ri.Status != cluster.StatusDone}
	marked := map[int]bool{}
	if ri.Status == cluster.StatusParked {
		sid, _ := c.authenticated(r)
		q := c.question(ri, c.csrfToken(sid))
		b.Question = &q
		for _, cv := range q.Calls {
			marked[cv.Line] = true
		}
	}
	b.Code = codeLines(ri.Code, marked)
	b.Result = cmp.Or(ri.Result, ri.Progress)
	if b.Result != nil {
		b.Timeline = newTimeline(b.Result.ToolCalls)
		if len(b.Result.Value) > 0 {
			b.Value = prettyJSON(b.Result.Value)
		}
	}
	if ri.Trace != "" && strings.Contains(c.opts.TraceURL, "{trace}") {
		b.TraceURL = strings.ReplaceAll(c.opts.TraceURL, "{trace}", url.PathEscape(ri.Trace))
	}
	c.render(w, r, "run", "Run "+shortID(id), b)
}

// cellLines streams a cell's lines (cluster.Node.FollowCell) as
// server-sent "line" events, then "end".
func (c *Console) cellLines(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	id := r.PathValue("id")
	ri, err := c.node.Run(r.Context(), id)
	if err != nil || !ri.Cell {
		http.Error(w, "No such cell.", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	fmt.Fprint(w, "retry: 2000\n\n")
	fl.Flush()
	if ri.Status == cluster.StatusDone {
		// Its log is gone once handed out: the lines are in its result.
		for i, l := range ri.Result.Logs {
			b, _ := json.Marshal(cluster.CellLine{Seq: uint64(i + 1), Text: l, HandedOut: true})
			fmt.Fprintf(w, "event: line\ndata: %s\n\n", b)
		}
		fmt.Fprint(w, "event: end\ndata: {}\n\n")
		fl.Flush()
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-c.ctx.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	_ = c.node.FollowCell(ctx, id, func(l cluster.CellLine) bool {
		b, _ := json.Marshal(l)
		ev := "line"
		if l.Event != "" {
			ev = l.Event
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev, b)
		fl.Flush()
		return true
	})
}

func (c *Console) stopCell(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ri, err := c.node.Run(r.Context(), id)
	if err != nil || !ri.Cell {
		c.back(w, r, "", "error", "No such cell.")
		return
	}
	ctx := codemode.WithSession(r.Context(), ri.Session)
	if err := c.node.CancelCell(ctx, id); err != nil {
		c.back(w, r, "", "error", "The cell was not stopped: "+err.Error())
		return
	}
	c.log.Info("a cell was stopped in the console", "run", id, "by", cmp.Or(nameOf(r), "someone"), "from", hostOf(r.RemoteAddr))
	c.back(w, r, "", "flash", "Stopping cell "+shortID(id)+".")
}

// ---- Playground.

type playBody struct {
	Code         string
	Instructions string
	Catalog      []codemode.CatalogEntry
	Off          bool
}

const playExample = `// Try a program against the tools the model sees.
const catalog = Object.keys(tools);
console.log("namespaces:", catalog.join(", "));
return catalog.length;
`

func (c *Console) playPage(w http.ResponseWriter, r *http.Request) {
	b := playBody{Code: playExample, Off: c.opts.Runtime == nil}
	if !b.Off {
		if rt := c.opts.Runtime(); rt != nil {
			b.Instructions = rt.Instructions()
			b.Catalog = rt.Catalog()
		}
	}
	c.render(w, r, "play", "Playground", b)
}

// maxPlayBytes bounds a program submitted from the playground.
const maxPlayBytes = 256 << 10

// play submits a program as a run (the workers' policy applies, as to
// any) and shows its page.
func (c *Console) play(w http.ResponseWriter, r *http.Request) {
	if c.opts.Runtime == nil {
		c.back(w, r, "", "error", "The playground is off here.")
		return
	}
	code := r.PostFormValue("code")
	if strings.TrimSpace(code) == "" || len(code) > maxPlayBytes {
		c.back(w, r, c.opts.Prefix+"play", "error", fmt.Sprintf("Write a program (at most %d bytes).", maxPlayBytes))
		return
	}
	rt := c.opts.Runtime()
	if rt == nil {
		c.back(w, r, c.opts.Prefix+"play", "error", "No tools are configured yet.")
		return
	}
	who := cmp.Or(nameOf(r), "someone")
	ctx := codemode.WithSession(context.WithoutCancel(r.Context()), "console")
	id, err := c.node.Submit(ctx, rt, code)
	if err != nil {
		c.back(w, r, c.opts.Prefix+"play", "error", "The program was not submitted: "+err.Error())
		return
	}
	c.log.Info("a program was submitted in the console", "run", id, "by", who, "from", hostOf(r.RemoteAddr), "codeBytes", len(code))
	http.Redirect(w, r, c.opts.Prefix+"runs/"+id, http.StatusSeeOther)
}

// ---- Nodes.

type nodesBody struct {
	Nodes  []cluster.NodeStatus
	Failed string
}

func (c *Console) nodesPage(w http.ResponseWriter, r *http.Request) {
	ns, err := c.node.Nodes(r.Context())
	b := nodesBody{Nodes: ns}
	if err != nil {
		b.Failed = err.Error()
	}
	sort.Slice(b.Nodes, func(i, j int) bool { return b.Nodes[i].Name < b.Nodes[j].Name })
	c.render(w, r, "nodes", "Nodes", b)
}

func (c *Console) drain(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("name")
	busy, err := c.node.Drain(r.Context(), name)
	if err != nil {
		c.back(w, r, "", "error", "Not drained: "+err.Error())
		return
	}
	c.log.Info("a worker was drained in the console", "worker", name, "by", cmp.Or(nameOf(r), "someone"), "from", hostOf(r.RemoteAddr))
	c.back(w, r, "", "flash", fmt.Sprintf("Draining %s: it finishes its %d runs and stops.", name, busy))
}

// ---- Helpers of the templates.

func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return duration(time.Since(t)) + " ago"
}

func duration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// prettyJSON indents a JSON value for reading; what is not JSON is
// shown as it is.
func prettyJSON(v any) string {
	var raw []byte
	switch v := v.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	case string:
		raw = []byte(v)
	default:
		b, _ := json.Marshal(v)
		raw = b
	}
	var out bytes.Buffer
	if json.Indent(&out, raw, "", "  ") != nil {
		return string(raw)
	}
	return out.String()
}
