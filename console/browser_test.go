package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/cluster"
)

// The console in a real browser: Chromium (the Debian package, which
// make test installs) driven over the DevTools protocol. Each page's
// screenshot is a test artifact (go test -artifacts), and with
// CODEMODE_SCREENSHOTS=DIR also written to DIR (the README's come from
// there).

// chromium finds the browser, or skips the test when none is installed
// and CODEMODE_BROWSER_REQUIRED is not set (make test sets it).
func chromium(t *testing.T) string {
	for _, name := range []string{os.Getenv("CODEMODE_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CODEMODE_BROWSER_REQUIRED") != "" {
		t.Fatal("no Chromium found (install the chromium package, or set CODEMODE_CHROMIUM)")
	}
	t.Skip("no Chromium found: install the chromium package (make test does) to run the browser tests")
	return ""
}

// browser returns a function that starts a headless Chromium for the
// test, one per person (its own cookies), and returns its tab.
func browser(t *testing.T) (tab func() context.Context) {
	path := chromium(t)
	return func() context.Context {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.Flag("headless", "new"),
			chromedp.NoSandbox, // root in CI containers
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.WindowSize(1280, 900),
		)
		actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
		t.Cleanup(cancel)
		bctx, bcancel := chromedp.NewContext(actx)
		t.Cleanup(bcancel)
		if err := chromedp.Run(bctx); err != nil {
			t.Fatalf("starting Chromium: %v", err)
		}
		return bctx
	}
}

// run runs browser actions with a time limit.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// shot saves a screenshot of the tab's whole page as an artifact.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	var png []byte
	run(t, ctx, "screenshot "+name, chromedp.FullScreenshot(&png, 100))
	dirs := []string{t.ArtifactDir()}
	if d := os.Getenv("CODEMODE_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pwned reports whether any hostile markup ran in the tab.
func pwned(t *testing.T, ctx context.Context) bool {
	var v bool
	run(t, ctx, "checking for injected script", chromedp.Evaluate(`window.__pwned === 1`, &v))
	return v
}

// setName gives a tab's person a name, by the form at the top.
func setName(t *testing.T, ctx context.Context, base, name string) {
	run(t, ctx, "naming "+name,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`form.who input[name=name]`),
		chromedp.SetValue(`form.who input[name=name]`, name),
		chromedp.Submit(`form.who input[name=name]`),
	)
	// The form's answer reloads the page, with the name in it.
	eventually(t, ctx, "the name saved", `document.querySelector("form.who button")?.textContent === "Change"`)
}

// count is how many elements match a selector in the tab.
func count(t *testing.T, ctx context.Context, sel string) int {
	var n int
	run(t, ctx, "counting "+sel, chromedp.Evaluate(fmt.Sprintf(`document.querySelectorAll(%q).length`, sel), &n))
	return n
}

// eventually polls cond in the tab until it holds.
func eventually(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ok bool
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := chromedp.Run(c, chromedp.Evaluate(js, &ok))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var html string
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			_ = chromedp.Run(c, chromedp.OuterHTML("main", &html))
			cancel()
			t.Fatalf("timed out waiting for %s; the page's main:\n%s", what, html)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBrowser(t *testing.T) {
	f := newFixture(t, "")
	tab := browser(t)
	base := f.srv.URL
	ada, grace := tab(), tab()
	setName(t, ada, base, "Ada")
	setName(t, grace, base, "Grace")

	t.Run("approvals", func(t *testing.T) {
		// Two people have the questions page open when three runs ask.
		run(t, ada, "ada opens questions", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible("#questions"))
		run(t, grace, "grace opens questions", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible("#questions"))
		ids := []string{f.submit(t, asksRefund), f.submit(t, asksRefund), f.submit(t, asksRefund)}
		for _, id := range ids {
			f.status(t, id, cluster.StatusParked)
		}
		// They appear live in both tabs, without a reload.
		for _, ctx := range []context.Context{ada, grace} {
			eventually(t, ctx, "three questions", `document.querySelectorAll("article.question").length === 3`)
		}
		// Each shows its program with the line of the call marked.
		if n := count(t, ada, "article.question ol.code li.marked#L3"); n != 3 {
			t.Fatalf("%d programs have the call's line (3) marked, want 3", n)
		}
		shot(t, ada, "questions")

		// At once: Ada approves the first while Grace denies the second.
		button := func(id, verdict string) string {
			return fmt.Sprintf(`#q-%s button[value=%s]`, id, verdict)
		}
		var wg sync.WaitGroup
		wg.Go(func() { run(t, ada, "ada approves", chromedp.Click(button(ids[0], "allow"))) })
		wg.Go(func() { run(t, grace, "grace denies", chromedp.Click(button(ids[1], "deny"))) })
		wg.Wait()
		// Then both answer the third at the same moment: one wins.
		for _, ctx := range []context.Context{ada, grace} {
			eventually(t, ctx, "the third question alone", fmt.Sprintf(
				`document.querySelectorAll("article.question").length === 1 && !!document.querySelector(%q)`, button(ids[2], "allow")))
		}
		wg.Go(func() { run(t, ada, "ada approves the third", chromedp.Click(button(ids[2], "allow"))) })
		wg.Go(func() { run(t, grace, "grace denies the third", chromedp.Click(button(ids[2], "deny"))) })
		wg.Wait()
		for _, ctx := range []context.Context{ada, grace} {
			eventually(t, ctx, "no questions left", `document.querySelectorAll("article.question").length === 0 && !!document.querySelector("#no-questions")`)
		}
		first := f.status(t, ids[0], cluster.StatusDone)
		second := f.status(t, ids[1], cluster.StatusDone)
		third := f.status(t, ids[2], cluster.StatusDone)
		if !first.Result.OK || len(first.Answers) != 1 || first.Answers[0].By != "Ada (console, 127.0.0.1)" || !first.Answers[0].Allow {
			t.Errorf("the run Ada approved: %+v %+v", first.Result, first.Answers)
		}
		if second.Result.OK || len(second.Answers) != 1 || second.Answers[0].By != "Grace (console, 127.0.0.1)" || second.Answers[0].Allow {
			t.Errorf("the run Grace denied: %+v %+v", second.Result, second.Answers)
		}
		if len(third.Answers) != 1 {
			t.Fatalf("the third run has %d answers: %+v", len(third.Answers), third.Answers)
		}
		winner, loser := ada, grace
		if !third.Answers[0].Allow {
			winner, loser = grace, ada
		}
		// The loser was told who answered first — when its answer reached
		// the server at all: under load the winner's answer can reach the
		// loser's page first and take the question (and the button the
		// loser clicked) away. Either way the loser's page never says it
		// answered the third run. (console_test.go covers the message
		// over HTTP, where both answers always arrive.)
		eventually(t, loser, "the loser's page", fmt.Sprintf(`(() => {
			const err = document.querySelector(".error"), flash = document.querySelector(".flash");
			if (flash && flash.textContent.includes(%q)) return false;
			return err ? err.textContent.includes("answered already") : document.querySelectorAll("article.question").length === 0;
		})()`, ids[2][:min(12, len(ids[2]))]))
		eventually(t, winner, "the winner's message", `(document.querySelector(".flash")?.textContent || "").includes("Answered run")`)
		if want := int64(1 + btoi(third.Answers[0].Allow)); f.refunds.Load() != want {
			t.Errorf("%d refunds, want %d", f.refunds.Load(), want)
		}
		shot(t, loser, "questions-answered-first")
	})

	t.Run("timeline", func(t *testing.T) {
		id := f.submit(t, `const a = tools.clock.sleep({ ms: 120 });
const b = tools.clock.sleep({ ms: 60 });
await Promise.all([a, b]);
await tools.clock.sleep({ ms: 40 });
const orders = await tools.shop.list({});
try { await tools.evil[`+"`"+hostile+"`"+`]({ note: `+"`"+hostile+"`"+` }); } catch {}
console.log(`+"`"+hostile+"`"+`);
return { orders, note: `+"`"+hostile+"`"+` };`)
		ri := f.status(t, id, cluster.StatusDone)
		if !ri.Result.OK {
			t.Fatalf("the run failed: %+v", ri.Result.Error)
		}
		run(t, ada, "the run page", chromedp.Navigate(base+"/console/runs/"+id), chromedp.WaitVisible("figure.timeline svg"))
		if n := count(t, ada, "figure.timeline g.call"); n != len(ri.Result.ToolCalls) {
			t.Fatalf("the time line draws %d calls of %d", n, len(ri.Result.ToolCalls))
		}
		var text string
		run(t, ada, "reading the page", chromedp.Text("main", &text))
		if !strings.Contains(text, hostile) {
			t.Fatalf("the hostile text is not shown as text:\n%s", text)
		}
		if pwned(t, ada) {
			t.Fatal("markup from a run ran in the page")
		}
		shot(t, ada, "run")
		run(t, ada, "the runs page", chromedp.Navigate(base+"/console/runs"), chromedp.WaitVisible("table.runs"))
		eventually(t, ada, "the run in the list", fmt.Sprintf(`!!document.querySelector('tr[data-run=%q]')`, id))
		shot(t, ada, "runs")
	})

	t.Run("cell", func(t *testing.T) {
		ctx := codemode.WithSession(context.Background(), "cells")
		id, err := f.node.StartCell(ctx, f.rt, `for (let i = 1; ; i++) {
  console.log("tick " + i);
  await tools.clock.sleep({ ms: 100 });
}`)
		if err != nil {
			t.Fatal(err)
		}
		run(t, grace, "the cell's page", chromedp.Navigate(base+"/console/runs/"+id), chromedp.WaitVisible("#cell-lines"))
		// The lines arrive while the page is open.
		eventually(t, grace, "tick 3", `document.getElementById("cell-lines").textContent.includes("tick 3")`)
		var before string
		run(t, grace, "reading the lines", chromedp.Text("#cell-lines", &before))
		eventually(t, grace, "more ticks", fmt.Sprintf(`document.getElementById("cell-lines").textContent.length > %d`, len(before)+10))
		shot(t, grace, "cell")
		// Reading them here does not take them from the cell's session.
		u, err := f.node.WaitCell(ctx, id, 2*time.Second, nil)
		if err != nil || len(u.Logs) == 0 || u.Logs[0] != "tick 1" {
			t.Fatalf("the session's wait after the console read: %+v %v", u, err)
		}
		run(t, grace, "stop", chromedp.Click(`form.stop button`))
		eventually(t, grace, "the cell ended", `document.querySelector(".status")?.textContent === "done"`)
		ri := f.status(t, id, cluster.StatusDone)
		if ri.Result.OK || len(ri.Result.ToolCalls) == 0 {
			t.Fatalf("the stopped cell: %+v", ri.Result)
		}
		run(t, grace, "the cells page", chromedp.Navigate(base+"/console/cells"), chromedp.WaitVisible("table.runs"))
		eventually(t, grace, "the cell in the list", fmt.Sprintf(`!!document.querySelector('tr[data-run=%q]')`, id))
	})

	t.Run("playground", func(t *testing.T) {
		run(t, ada, "the playground", chromedp.Navigate(base+"/console/play"), chromedp.WaitVisible("textarea[name=code]"))
		var instructions string
		run(t, ada, "instructions", chromedp.Text("pre.instructions", &instructions))
		if !strings.Contains(instructions, "tools") {
			t.Fatalf("the instructions: %q", instructions)
		}
		shot(t, ada, "playground")
		run(t, ada, "run a program",
			chromedp.SetValue("textarea[name=code]", `const o = await tools.shop.list({}); console.log("got", o.length); return o.map(x => x.toUpperCase());`),
			chromedp.Click("form.play button"),
			chromedp.WaitVisible("#run"),
		)
		eventually(t, ada, "the result", `(document.querySelector("pre.value")?.textContent || "").includes("O-3")`)
		eventually(t, ada, "the time line", `document.querySelectorAll("figure.timeline g.call").length === 1`)
	})

	t.Run("nodes", func(t *testing.T) {
		run(t, ada, "the nodes page", chromedp.Navigate(base+"/console/nodes"), chromedp.WaitVisible("table.nodes"))
		eventually(t, ada, "this process", `!!document.querySelector('tr[data-node="console-test"]')`)
		shot(t, ada, "nodes")
	})

	if pwned(t, ada) || pwned(t, grace) {
		t.Fatal("markup from a run ran in a page")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
