package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/internal/secret"
	"github.com/codemode-go/codemode/store"
)

// exitSuspended is the status of a run that suspended with calls
// pending (codemode run --suspend-dir, codemode resume).
const exitSuspended = 3

// A suspend directory holds one suspended run:
//
//	state              the run's state (authenticated with the state key)
//	pending/ID.json    each pending call: {"id", "name", "path", "input"}
//	results/ID.json    answers written by a person or a program:
//	                   {"output": ...} or {"error": "message"}
//	result.json        the Result, once the run has ended
//
// The pending files are for reading; resume takes the calls from the
// state itself, which nobody without the key can change.
const (
	stateFile    = "state"
	pendingDir   = "pending"
	resultsDir   = "results"
	resultFile   = "result.json"
	keyFileName  = "state.key"
	runStoreName = "runs"
)

// maxAnswerBytes bounds an answer written by hand (DIR/results/ID.json):
// it becomes a value in the run's memory, which is bounded too.
const maxAnswerBytes = 16 << 20

// suspendFlags are the flags of suspending and resuming.
type suspendFlags struct {
	dir       string
	keyFile   string
	runStore  string
	countAway bool
}

// registerKey adds the flags that say where a suspended run's key and
// record are kept: in the per-user configuration directory by default,
// not the cache, so that clearing a cache never strands a run.
func (s *suspendFlags) registerKey(fs *flag.FlagSet) {
	key, runs := "", ""
	if root, err := secret.Root(); err == nil {
		key, runs = filepath.Join(root, keyFileName), filepath.Join(root, runStoreName)
	}
	fs.StringVar(&s.keyFile, "state-key-file", key, "file with the key (32 bytes or more) that authenticates suspended states; made with a random key if missing; it must be private to you")
	fs.StringVar(&s.runStore, "run-store", runs, "`directory` of run records, which let each suspended step run once; share it between the processes that resume a run")
}

// key reads the state key, making a random one when the file does not
// exist yet. A key file others could read or replace is refused.
func (s *suspendFlags) key() ([]byte, error) {
	if s.keyFile == "" {
		return nil, errors.New("no --state-key-file and no configuration directory to keep one in")
	}
	return secret.Key(s.keyFile, codemode.MinStateKeyBytes)
}

// runs opens the run store.
func (s *suspendFlags) runs() (*store.DirRuns, error) {
	if s.runStore == "" {
		return nil, errors.New("no --run-store and no configuration directory to keep one in")
	}
	return store.OpenDirRuns(s.runStore)
}

// suspendRun is codemode run --suspend-dir: the run's calls are not made;
// when it waits for them, its state and the calls are written to the
// directory.
func suspendRun(ctx context.Context, rf runtimeFlags, sfl suspendFlags, flags [][2]string, tools codemode.Tools, code string, stdout, stderr io.Writer) int {
	if err := prepareDir(sfl.dir); err != nil {
		fmt.Fprintf(stderr, "codemode run: --suspend-dir: %v\n", err)
		return exitUsage
	}
	key, err := sfl.key()
	if err != nil {
		fmt.Fprintf(stderr, "codemode run: state key: %v\n", err)
		return exitFailure
	}
	runs, err := sfl.runs()
	if err != nil {
		fmt.Fprintf(stderr, "codemode run: %v\n", err)
		return exitFailure
	}
	if err := saveFlags(sfl.dir, key, flags); err != nil {
		fmt.Fprintf(stderr, "codemode run: %v\n", err)
		return exitFailure
	}
	opts := rf.options(tools)
	opts.StateKey = key
	opts.TimeoutIncludesSuspended = sfl.countAway
	rt, err := codemode.New(opts)
	if err != nil {
		return newFailed(err, stderr)
	}
	defer rt.Close()
	rf.warnUnmatched(rt, stderr)
	res, s, err := codemode.Steps{Runtime: rt, Runs: runs}.Start(ctx, code)
	return settle(sfl.dir, "run", res, s, err, rf.pretty, stdout, stderr)
}

// prepareDir makes a suspend directory, refusing one that holds a run
// already (a state or result of its own) or holds links.
func prepareDir(dir string) error {
	for _, name := range []string{stateFile, resultFile} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%s already holds a run (%s); use another directory or remove it", dir, name)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return checkDir(dir)
}

// checkDir refuses a suspend directory that is, or holds in the places
// codemode reads and writes, a symbolic link or something other than
// what belongs there: following one would read or delete files elsewhere.
func checkDir(dir string) error {
	want := map[string]bool{"": true, pendingDir: true, resultsDir: true, stateFile: false, resultFile: false, flagsFile: false}
	for name, isDir := range want {
		fi, err := os.Lstat(filepath.Join(dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist) && name != "":
			continue
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link; a suspend directory holds none", filepath.Join(dir, name))
		case fi.IsDir() != isDir:
			return fmt.Errorf("%s is not what a suspend directory keeps there", filepath.Join(dir, name))
		}
	}
	return nil
}

// settle writes what a run step left: its Result when it ended, else its
// state and pending calls. It prints what happened and returns the exit
// status.
func settle(dir, cmd string, res codemode.Result, s *codemode.Suspended, err error, pretty bool, stdout, stderr io.Writer) int {
	if s == nil {
		if err == nil || res.Error != nil || res.OK {
			if werr := writeFileAtomic(filepath.Join(dir, resultFile), mustJSON(res)); werr != nil {
				fmt.Fprintf(stderr, "codemode %s: %v\n", cmd, werr)
				return exitFailure
			}
			clearRun(dir)
		}
		if werr := writeJSON(stdout, res, pretty); werr != nil {
			fmt.Fprintf(stderr, "codemode %s: %v\n", cmd, werr)
			return exitFailure
		}
		if err != nil {
			fmt.Fprintf(stderr, "codemode %s: %v\n", cmd, err)
			return exitFailure
		}
		if !res.OK {
			return exitFailure
		}
		return exitOK
	}
	// The state first: once it is written, the pending files it makes
	// stale are only informational.
	if err := writeFileAtomic(filepath.Join(dir, stateFile), s.State); err != nil {
		fmt.Fprintf(stderr, "codemode %s: %v\n", cmd, err)
		return exitFailure
	}
	if err := writePending(dir, s.Pending); err != nil {
		fmt.Fprintf(stderr, "codemode %s: %v\n", cmd, err)
		return exitFailure
	}
	// Where answers written by hand go.
	if err := os.MkdirAll(filepath.Join(dir, resultsDir), 0o700); err != nil {
		fmt.Fprintf(stderr, "codemode %s: %v\n", cmd, err)
		return exitFailure
	}
	reason := ""
	if res.Suspended != nil {
		reason = res.Suspended.Reason
	}
	out := struct {
		Suspended  bool         `json:"suspended"`
		Reason     string       `json:"reason,omitempty"`
		RunID      string       `json:"runId"`
		Step       int          `json:"step"`
		Dir        string       `json:"dir"`
		StateBytes int          `json:"stateBytes"`
		Pending    []pendingOut `json:"pending"`
		ToolCalls  any          `json:"toolCalls"`
	}{true, reason, s.RunID, s.Step, dir, len(s.State), []pendingOut{}, res.ToolCalls}
	var ids []string
	for _, p := range s.Pending {
		out.Pending = append(out.Pending, pendingFile(p))
		ids = append(ids, strconv.Itoa(p.Index))
	}
	if err := writeJSON(stdout, out, pretty); err != nil {
		fmt.Fprintf(stderr, "codemode %s: %v\n", cmd, err)
		return exitFailure
	}
	fmt.Fprintf(stderr, "codemode: the run is suspended, waiting for %s. Continue it with\n"+
		"  codemode resume --run %s %s     (make the calls)\n"+
		"  codemode resume --deny %s %s    (refuse them)\n"+
		"or write %s/%s/ID.json ({\"output\": ...} or {\"error\": \"...\"}) and run codemode resume %s\n",
		plural(len(s.Pending), "call"), strings.Join(ids, ","), dir, strings.Join(ids, ","), dir, dir, resultsDir, dir)
	return exitSuspended
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// pendingOut is a pending call as the command line shows it, on standard
// output and in DIR/pending/ID.json: its id (what --run and --deny
// take), and its input as a person is shown it.
type pendingOut struct {
	ID          int                   `json:"id"`
	Name        string                `json:"name"`
	Path        []string              `json:"path"`
	Input       json.RawMessage       `json:"input"`
	Annotations *codemode.Annotations `json:"annotations,omitempty"`
	Reason      string                `json:"reason,omitempty"`
	Deadline    time.Time             `json:"deadline,omitzero"`
}

func pendingFile(p codemode.PendingCall) pendingOut {
	return pendingOut{ID: p.Index, Name: p.Name, Path: p.Path, Input: p.Shown(), Annotations: p.Annotations, Reason: p.Reason, Deadline: p.Deadline}
}

// writePending replaces the pending files with the run's pending calls.
func writePending(dir string, pending []codemode.PendingCall) error {
	pd := filepath.Join(dir, pendingDir)
	if err := os.RemoveAll(pd); err != nil {
		return err
	}
	if err := os.MkdirAll(pd, 0o700); err != nil {
		return err
	}
	for _, p := range pending {
		if err := writeFileAtomic(filepath.Join(pd, strconv.Itoa(p.Index)+".json"), mustJSON(pendingFile(p))); err != nil {
			return err
		}
	}
	return nil
}

// clearRun removes a finished run's state, pending calls and answers.
func clearRun(dir string) {
	_ = os.Remove(filepath.Join(dir, stateFile))
	_ = os.Remove(filepath.Join(dir, flagsFile))
	_ = os.RemoveAll(filepath.Join(dir, pendingDir))
	_ = os.RemoveAll(filepath.Join(dir, resultsDir))
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // Results and calls are plain data
	}
	return append(b, '\n')
}

// writeFileAtomic writes a file by renaming a complete temporary one over
// it, so a crash leaves the old file or the new one, never half of one.
func writeFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

const resumeHelp = `Usage: codemode resume [flags] DIR

Continues the run suspended in DIR (by codemode run --suspend-dir DIR) in
this process: it answers pending calls, runs the program until it ends or
waits again, and prints the Result (or the new pending calls). A run
resumes only against the tools it had, and its --policy decides the calls
the program makes from here on: DIR/flags.json records the flags run was
given (--config, --openapi, --demo-tools, the credential variables'
names, --policy, --state-key-file, ...; paths, never secrets) and resume
uses them, so it needs none. A flag given here replaces the recorded one.

A pending call is answered by --run (the tool is called now), --deny (the
program gets a ToolError, "<tool> was denied: <--deny-message>", and the
audit says denied), or a file DIR/results/ID.json
holding {"output": VALUE} or {"error": "message"} (at most 16 MiB). Calls
left unanswered stay pending. The calls and their inputs come from the
authenticated state, not from DIR/pending, which is there to be read.

Each step of a run runs once. Its record in --run-store (shared by every
process that resumes the run) is taken before any call is made, so a
second resume of the same step, at the same time or later, an older state
copied back, or the state of a run that has ended is refused. A resume
stopped half way (Ctrl-C, a crash) leaves its step taken: its calls may
have been made. A directory holding symbolic links is refused.

Exit status: 0 when the program succeeded, 1 when it failed, 2 for usage
errors, 3 when it is suspended again.
`

// idSet is a flag value: "all" or a comma-separated list of call ids.
type idSet struct {
	all bool
	ids map[int]bool
}

func (s *idSet) String() string {
	if s.all {
		return "all"
	}
	var out []string
	for id := range s.ids {
		out = append(out, strconv.Itoa(id))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func (s *idSet) Set(v string) error {
	if v == "all" {
		s.all = true
		return nil
	}
	for _, f := range strings.Split(v, ",") {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || id < 0 {
			return fmt.Errorf("want call ids like 0,2 or all, not %q", v)
		}
		if s.ids == nil {
			s.ids = map[int]bool{}
		}
		s.ids[id] = true
	}
	return nil
}

func (s *idSet) has(id int) bool { return s.all || s.ids[id] }

// overlaps reports whether two sets share a call ("all" shares every
// call with any set that is not empty).
func (s *idSet) overlaps(o *idSet) bool {
	if (s.all && (o.all || len(o.ids) > 0)) || (o.all && len(s.ids) > 0) {
		return true
	}
	for id := range s.ids {
		if o.ids[id] {
			return true
		}
	}
	return false
}

func resumeCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("resume", resumeHelp, stderr)
	var rf runtimeFlags
	rf.registerPretty(fs)
	rf.registerEngine(fs)
	rf.registerPolicy(fs)
	var sf sourceFlags
	sf.register(fs, true, "warn")
	var sfl suspendFlags
	sfl.registerKey(fs)
	var run, deny idSet
	fs.Var(&run, "run", "pending calls to make now: `ids` like 0,2, or all")
	fs.Var(&deny, "deny", "pending calls to refuse: `ids` like 0,2, or all")
	denyMessage := fs.String("deny-message", "not approved", "the reason a denied call's ToolError gives (\"<tool> was denied: <reason>\")")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(rest) != 1 {
		return usageFailed(stderr, "codemode resume", "want exactly one DIR, got %d", len(rest))
	}
	dir := rest[0]
	if err := checkDir(dir); err != nil {
		fmt.Fprintf(stderr, "codemode resume: %v\n", err)
		return exitUsage
	}
	// The run's own flags, unless given again; checked with the key below,
	// before anything they name is started.
	saved, err := loadFlags(dir)
	if err == nil {
		err = applyFlags(fs, saved)
	}
	if err != nil {
		fmt.Fprintf(stderr, "codemode resume: %v\n", err)
		return exitUsage
	}
	if err := rf.check(); err != nil {
		fmt.Fprintf(stderr, "codemode resume: %v\n", err)
		return exitUsage
	}
	if run.overlaps(&deny) {
		fmt.Fprintln(stderr, "codemode resume: --run and --deny name the same calls; a call is answered once")
		return exitUsage
	}
	state, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		if _, rerr := os.Stat(filepath.Join(dir, resultFile)); rerr == nil {
			fmt.Fprintf(stderr, "codemode resume: the run in %s has ended; its Result is in %s\n", dir, filepath.Join(dir, resultFile))
		} else {
			fmt.Fprintf(stderr, "codemode resume: %v\n", err)
		}
		return exitUsage
	}
	key, err := sfl.key()
	if err != nil {
		fmt.Fprintf(stderr, "codemode resume: state key: %v\n", err)
		return exitFailure
	}
	if err := checkFlags(dir, key, saved); err != nil {
		fmt.Fprintf(stderr, "codemode resume: %v\n", err)
		return exitFailure
	}
	// What this resume used, for the next: the recorded flags and the
	// ones given now in their place.
	flags, err := givenFlags(fs)
	if err == nil {
		err = saveFlags(dir, key, flags)
	}
	if err != nil {
		fmt.Fprintf(stderr, "codemode resume: %v\n", err)
		return exitFailure
	}
	runs, err := sfl.runs()
	if err != nil {
		fmt.Fprintf(stderr, "codemode resume: %v\n", err)
		return exitFailure
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	src, exit := openSources(ctx, "resume", &sf, stderr)
	if src == nil {
		return exit
	}
	defer src.close()
	opts := rf.options(src.tools())
	opts.StateKey = key
	rt, err := codemode.New(opts)
	if err != nil {
		return newFailed(err, stderr)
	}
	defer rt.Close()
	rf.warnUnmatched(rt, stderr)
	s, err := rt.Inspect(state)
	if err != nil {
		fmt.Fprintf(stderr, "codemode resume: %s: %v\n", filepath.Join(dir, stateFile), stateHint(err))
		return exitFailure
	}
	pending := map[int]bool{}
	for _, p := range s.Pending {
		pending[p.Index] = true
	}
	for _, set := range []*idSet{&run, &deny} {
		for id := range set.ids {
			if !pending[id] {
				fmt.Fprintf(stderr, "codemode resume: call %d is not pending (pending: %s)\n", id, pendingList(s.Pending))
				return exitUsage
			}
		}
	}
	// Every answer is read and checked before the step is taken: once it
	// is, calls are made, and a step runs once.
	answers := map[int]codemode.CallResult{}
	for _, p := range s.Pending {
		r, ok, err := answer(dir, p, &run, &deny, *denyMessage)
		if err != nil {
			fmt.Fprintf(stderr, "codemode resume: %v\n", err)
			return exitUsage
		}
		if ok {
			answers[p.Index] = r
		}
	}
	if len(answers) == 0 && s.NextTimer == 0 && s.Deadline.IsZero() {
		fmt.Fprintf(stderr, "codemode resume: no pending call is answered (pending: %s); use --run, --deny or %s/%s/ID.json\n",
			pendingList(s.Pending), dir, resultsDir)
		return exitUsage
	}
	var answered []int
	res, next, err := codemode.Steps{Runtime: rt, Runs: runs}.Resume(ctx, state, func(ctx context.Context, s *codemode.Suspended) ([]codemode.CallResult, error) {
		var results []codemode.CallResult
		for _, p := range s.Pending {
			r, ok := answers[p.Index]
			if !ok {
				continue
			}
			if r.Index < 0 { // --run: the call is made now
				r = rt.RunPending(ctx, p)
			}
			results = append(results, r)
			answered = append(answered, p.Index)
		}
		return results, nil
	})
	if errors.Is(err, codemode.ErrStepTaken) {
		fmt.Fprintf(stderr, "codemode resume: %v\n", err)
		return exitFailure
	}
	if err != nil && next == nil && res.Error == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, codemode.ErrStopped) {
		fmt.Fprintf(stderr, "codemode resume: %v\n", stateHint(err))
		return exitFailure
	}
	for _, id := range answered {
		_ = os.Remove(filepath.Join(dir, resultsDir, strconv.Itoa(id)+".json"))
	}
	return settle(dir, "resume", res, next, err, rf.pretty, stdout, stderr)
}

// answer finds the answer to a pending call: made now (--run, returned
// with ID -1 for the caller to make once the step is its own), refused
// (--deny), or written in DIR/results/ID.json. ok is false when there is
// none.
func answer(dir string, p codemode.PendingCall, run, deny *idSet, denyMessage string) (codemode.CallResult, bool, error) {
	name := filepath.Join(dir, resultsDir, strconv.Itoa(p.Index)+".json")
	b, err := readAnswer(name)
	switch {
	case err == nil && (run.has(p.Index) || deny.has(p.Index)):
		return codemode.CallResult{}, false, fmt.Errorf("call %d has an answer in %s and a --run or --deny", p.Index, name)
	case err == nil:
		var a struct {
			Output *json.RawMessage `json:"output"`
			Error  *string          `json:"error"`
		}
		if jerr := json.Unmarshal(b, &a); jerr != nil || (a.Output == nil) == (a.Error == nil) {
			return codemode.CallResult{}, false, fmt.Errorf(`%s: want {"output": VALUE} or {"error": "message"}`, name)
		}
		if a.Error != nil {
			return codemode.CallResult{Index: p.Index, Err: codemode.ToolError(*a.Error)}, true, nil
		}
		return codemode.CallResult{Index: p.Index, Output: *a.Output}, true, nil
	case !errors.Is(err, fs.ErrNotExist):
		return codemode.CallResult{}, false, err
	case run.has(p.Index):
		return codemode.CallResult{Index: -1}, true, nil
	case deny.has(p.Index):
		return codemode.CallResult{Index: p.Index, Denied: denyMessage}, true, nil
	}
	return codemode.CallResult{}, false, nil
}

// readAnswer reads an answer file: a regular file (not a link) of at most
// maxAnswerBytes.
func readAnswer(name string) ([]byte, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (a symbolic link is not followed)", name)
	}
	if fi.Size() > maxAnswerBytes {
		return nil, fmt.Errorf("%s has %d bytes; an answer may have %d", name, fi.Size(), maxAnswerBytes)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxAnswerBytes+1))
	if err == nil && len(b) > maxAnswerBytes {
		err = fmt.Errorf("%s has more than %d bytes; an answer may have %d", name, maxAnswerBytes, maxAnswerBytes)
	}
	return b, err
}

func pendingList(pending []codemode.PendingCall) string {
	var out []string
	for _, p := range pending {
		out = append(out, fmt.Sprintf("%d %s", p.Index, p.Name))
	}
	if out == nil {
		return "none"
	}
	return strings.Join(out, ", ")
}

// stateHint adds what to do to a state error.
func stateHint(err error) string {
	switch {
	case errors.Is(err, codemode.ErrStateInvalid):
		return err.Error() + " (was it made with another --state-key-file, or changed?)"
	case errors.Is(err, codemode.ErrStateTools):
		return err.Error() + " (give the --config, --openapi and --demo-tools the run had; " + flagsFile + " in the directory records the ones it was started with)"
	case errors.Is(err, codemode.ErrStateEngine):
		return err.Error() + " (resume it with the codemode build that suspended it)"
	}
	return err.Error()
}
