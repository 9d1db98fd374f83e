package cli

import (
	"flag"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseArgs: flags are read wherever they are among the arguments,
// and "--" ends them.
func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		rest    []string
		timeout time.Duration
		pretty  bool
		ns      string
	}{
		{args: []string{"prog.js"}, rest: []string{"prog.js"}},
		{args: []string{"--timeout", "5s", "prog.js"}, rest: []string{"prog.js"}, timeout: 5 * time.Second},
		{args: []string{"prog.js", "--timeout", "5s"}, rest: []string{"prog.js"}, timeout: 5 * time.Second},
		{args: []string{"-", "--pretty", "--timeout=2s"}, rest: []string{"-"}, pretty: true, timeout: 2 * time.Second},
		{args: []string{"a", "--pretty", "b", "--ns", "x", "c"}, rest: []string{"a", "b", "c"}, pretty: true, ns: "x"},
		{args: []string{"--pretty", "--", "--timeout", "5s"}, rest: []string{"--timeout", "5s"}, pretty: true},
		{args: []string{"a", "--", "-b"}, rest: []string{"a", "-b"}},
		{args: []string{"--ns", "--", "q"}, rest: []string{"q"}, ns: "--"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			var timeout duration
			fs.Var(&timeout, "timeout", "")
			pretty := fs.Bool("pretty", false, "")
			ns := fs.String("ns", "", "")
			rest, err := parseArgs(fs, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rest, tc.rest) || time.Duration(timeout) != tc.timeout || *pretty != tc.pretty || *ns != tc.ns {
				t.Errorf("got %q, timeout %v, pretty %v, ns %q; want %q, %v, %v, %q", rest, time.Duration(timeout), *pretty, *ns, tc.rest, tc.timeout, tc.pretty, tc.ns)
			}
		})
	}
}

// TestDurationFlag: a duration needs its unit; a bare number is refused
// with the spelling that was probably meant.
func TestDurationFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "5s", want: 5 * time.Second},
		{in: "250ms", want: 250 * time.Millisecond},
		{in: "0", want: 0},
		{in: "5", err: `"5" has no unit: write 5s (seconds) or 5ms (milliseconds)`},
		{in: "1.5", err: `write 1.5s`},
		{in: "-1s", err: "must not be negative"},
		{in: "soon", err: "want a duration with a unit"},
		{in: "10m", want: 10 * time.Minute},
		{in: "1h30m", want: 90 * time.Minute},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var d duration
			err := d.Set(tc.in)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("got %v, want an error containing %q", err, tc.err)
				}
			case err != nil || time.Duration(d) != tc.want:
				t.Errorf("got %v, %v; want %v", time.Duration(d), err, tc.want)
			case d.String() != tc.in && tc.in != "0":
				// Defaults in the help read as they are typed.
				t.Errorf("got String %q, want %q", d.String(), tc.in)
			}
		})
	}
}

// TestByteSizes: sizes read and print in the units people write.
func TestByteSizes(t *testing.T) {
	for _, tc := range []struct {
		in         string
		n          int64
		flag, text string
	}{
		{"67108864", 64 << 20, "64MiB", "64 MiB"},
		{"64MiB", 64 << 20, "64MiB", "64 MiB"},
		{"64 MiB", 64 << 20, "64MiB", "64 MiB"},
		{"1GiB", 1 << 30, "1GiB", "1 GiB"},
		{"1536K", 1536 << 10, "1536KiB", "1536 KiB"},
		{"1MB", 1000 * 1000, "1000000", "1000000 bytes"},
		{"1", 1, "1", "1 byte"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var b byteSize
			if err := b.Set(tc.in); err != nil || int64(b) != tc.n {
				t.Fatalf("got %d, %v; want %d", int64(b), err, tc.n)
			}
			if got := b.String(); got != tc.flag {
				t.Errorf("got flag form %q, want %q", got, tc.flag)
			}
			if got := humanBytes(tc.n); got != tc.text {
				t.Errorf("got text %q, want %q", got, tc.text)
			}
		})
	}
}

// TestVersionOf: a release says its version; a build from a checkout
// says "(devel)", with the revision when the build recorded it.
func TestVersionOf(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "5bdd4245abcdef0123456789"}, {Key: "vcs.modified", Value: "false"}}
	dirty := []debug.BuildSetting{{Key: "vcs.revision", Value: "5bdd4245abcdef0123456789"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"release", "v0.4.0", rev, "v0.4.0"},
		{"pseudo-version", "v0.0.0-20261201000000-5bdd4245abcd", nil, "v0.0.0-20261201000000-5bdd4245abcd"},
		{"devel", "(devel)", nil, "(devel)"},
		{"devel with revision", "(devel)", rev, "(devel) 5bdd4245abcd"},
		{"devel modified", "(devel)", dirty, "(devel) 5bdd4245abcd+dirty"},
		{"test binary", "", nil, "(devel)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/codemode-go/codemode", Version: tc.version}, Settings: tc.settings}
			if got := versionOf(bi); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	code, out, errs := runCLI(t, "", "version")
	if want := "codemode " + version() + " " + runtime.Version() + "\n"; code != exitOK || out != want {
		t.Errorf("got exit %d, %q (stderr %q); want 0, %q", code, out, errs, want)
	}
	if code, _, _ := runCLI(t, "", "version", "extra"); code != exitUsage {
		t.Errorf("got exit %d for an argument, want %d", code, exitUsage)
	}
}

// TestSubcommandHelp: each command's help lists the flags it uses and
// no others.
func TestSubcommandHelp(t *testing.T) {
	sources := []string{"config", "require-all", "connect-timeout", "log-level", "openapi", "demo-tools", "base-url", "bearer-env", "basic-env", "apikey-env"}
	engine := []string{"cache-dir", "no-cache"}
	limits := []string{"timeout", "max-tool-calls", "max-output-bytes"}
	run := []string{"max-memory", "max-concurrency"}
	cat := func(lists ...[]string) []string { return slices.Concat(lists...) }
	for _, tc := range []struct {
		cmd       string
		want, not []string
	}{
		{"run", cat(sources, engine, limits, run, []string{"call-timeout", "pretty"}), []string{"catalog-budget", "namespace", "limit", "http", "max-runs"}},
		{"catalog", cat(sources, engine, []string{"pretty"}), cat(limits, run, []string{"call-timeout", "catalog-budget", "namespace", "http"})},
		{"instructions", cat(sources, engine, limits, []string{"catalog-budget"}), cat(run, []string{"pretty", "call-timeout", "namespace"})},
		{"search", cat(sources, engine, []string{"namespace", "limit", "offset", "pretty"}), cat(limits, run, []string{"catalog-budget", "call-timeout"})},
		{"demo", cat(engine, limits, run), []string{"config", "openapi", "pretty", "catalog-budget"}},
		{"mcp", cat(sources, engine, limits, run, []string{"call-timeout", "catalog-budget", "http", "max-runs", "http-idle-timeout"}), []string{"pretty", "namespace", "limit"}},
		{"version", nil, []string{"config", "pretty"}},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			code, _, help := runCLI(t, "", tc.cmd, "-h")
			if code != exitOK {
				t.Fatalf("got exit %d, want 0", code)
			}
			for _, f := range tc.want {
				if !regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(f) + `( |$)`).MatchString(help) {
					t.Errorf("got help without -%s:\n%s", f, help)
				}
			}
			for _, f := range tc.not {
				if regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(f) + `( |$)`).MatchString(help) {
					t.Errorf("got help with -%s, which %s does not use", f, tc.cmd)
				}
			}
		})
	}
	// Defaults read as people write them.
	_, _, help := runCLI(t, "", "run", "-h")
	for _, want := range []string{"(default 64MiB)", "(default 30s)"} {
		if !strings.Contains(help, want) {
			t.Errorf("got run help without %q:\n%s", want, help)
		}
	}
}
