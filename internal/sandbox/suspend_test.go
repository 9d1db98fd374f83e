package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"weak"
)

// imageDigest is the digest of the image of a configuration with one
// namespace.
func imageDigest(t *testing.T, s *Sandbox) string {
	t.Helper()
	d, err := s.ImageSum(DefaultMemoryBytes, toolsNamespace)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var toolsNamespace = []Namespace{{Name: "tools", ErrorClass: &ErrorClass{Name: "ToolError", Member: "tool"}}}

// TestImageSum: the sum of a configuration's image is the same on two
// sandboxes, and differs for another memory limit, other namespaces and
// another boot; a sandbox without images has none.
func TestImageSum(t *testing.T) {
	a, b := newSandbox(t), newSandbox(t)
	sum := imageDigest(t, a)
	if len(sum) != 64 || imageDigest(t, b) != sum {
		t.Fatalf("two sandboxes: %q and %q", sum, imageDigest(t, b))
	}
	other := map[string]func() (string, error){
		"memory": func() (string, error) { return a.ImageSum(DefaultMemoryBytes/2, toolsNamespace) },
		"namespaces": func() (string, error) {
			return a.ImageSum(DefaultMemoryBytes, []Namespace{{Name: "tools"}, {Name: "more"}})
		},
		"boot script": func() (string, error) {
			s, err := New(context.Background(), testOptions(Options{BootScript: "globalThis.mark = 1"}))
			if err != nil {
				return "", err
			}
			defer s.Close()
			return s.ImageSum(DefaultMemoryBytes, toolsNamespace)
		},
	}
	for name, f := range other {
		if got, err := f(); err != nil || got == sum {
			t.Errorf("%s: %q, %v; want a sum other than %q", name, got, err, sum)
		}
	}
	s, err := New(context.Background(), testOptions(Options{BootEveryRun: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.ImageSum(DefaultMemoryBytes, toolsNamespace); err == nil {
		t.Errorf("a sandbox that boots every run: %q, want an error", got)
	}
}

// TestImageSameInEveryProcess boots a configuration's image in this
// process and in a child process: a suspended run resumes only against
// the same bytes. (Anything allocated in a random order while booting,
// such as a walk over a Go map, makes them differ.)
func TestImageSameInEveryProcess(t *testing.T) {
	if os.Getenv("CODEMODE_IMAGE_CHILD") == "1" {
		s := newSandbox(t)
		os.Stdout.WriteString("digest=" + imageDigest(t, s) + "\n")
		return
	}
	s := newSandbox(t)
	here := imageDigest(t, s)
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestImageSameInEveryProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CODEMODE_IMAGE_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		_, after, ok := strings.Cut(string(out), "digest=")
		if !ok {
			t.Fatalf("child printed no digest:\n%s", out)
		}
		if there := strings.Fields(after)[0]; there != here {
			t.Fatalf("image digest %s in a child process, %s here", there, here)
		}
	}
}

func newSandbox(t *testing.T) *Sandbox {
	t.Helper()
	s, err := New(context.Background(), testOptions(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// holdGet is a binding whose calls of get are held and the others
// refused.
var holdGet = []Namespace{{Name: "tools", Members: [][]string{{"get"}}, Admit: func(c Call) (Work, error) {
	if c.Key == "get" {
		return nil, ErrHold
	}
	return nil, &CallError{Kind: "Refused", Message: "no such tool"}
}}}

// encodeState writes a parked run as Resume reads it.
func encodeState(p *parked, snap []byte) State {
	head, _ := json.Marshal(p)
	return State{Header: head, Snapshot: slices.Clone(snap)}
}

// TestResumeSurvivesForgedStates resumes states whose bookkeeping was
// rewritten, as only a holder of the host's key could: boxes that point
// anywhere, paths and ids out of range. The engine may fail the run; the
// host must not crash, and every answer is an error or a Result.
func TestResumeSurvivesForgedStates(t *testing.T) {
	s := newSandbox(t)
	ctx := context.Background()
	// A call refused at once and never awaited: its rejection is in the
	// state, and reported when the run ends.
	req := Request{Program: `(async () => { tools.nope({}); return await tools.get({}) })()`,
		Bindings: holdGet, Suspend: true, Timeout: 5 * time.Second}
	res, err := s.Run(ctx, req)
	if err != nil || res.Suspended == nil {
		t.Fatalf("not suspended: %+v %v", res, err)
	}
	good, snap, err := decodeState(res.Suspended.State)
	if err != nil {
		t.Fatal(err)
	}
	if len(good.Rejected) == 0 {
		t.Fatal("the program's unhandled rejection is not in the state")
	}
	id := res.Suspended.Held[0].ID
	forgeries := map[string]func(p *parked){
		"main points anywhere":      func(p *parked) { p.Main = 0x7fff_fff0 },
		"main is zero":              func(p *parked) { p.Main = 0 },
		"main is misaligned":        func(p *parked) { p.Main++ },
		"rejection boxes":           func(p *parked) { p.Rejected = [][3]uint32{{1, 0xffff_fff0, 12}} },
		"path namespace":            func(p *parked) { p.Paths[0].NS = 99 },
		"negative namespace":        func(p *parked) { p.Paths[0].NS = -1 },
		"held path":                 func(p *parked) { p.Held[0].Path = 0 },
		"held path past the end":    func(p *parked) { p.Held[0].Path = 1000 },
		"no paths":                  func(p *parked) { p.Paths = nil },
		"timers far in the past":    func(p *parked) { p.Timers = []parkedTimer{{ID: 1, In: -1 << 62}} },
		"timer ids that never fire": func(p *parked) { p.Timers = []parkedTimer{{ID: -5, In: 1}} },
		"call counter behind":       func(p *parked) { p.CallSeq = -1 },
		"huge log bytes":            func(p *parked) { p.LogBytes = 1 << 62 },
		"settled with no value":     func(p *parked) { p.Settled = true },
		"another memory limit":      func(p *parked) { p.Memory = 1 << 20 },
		"another spec":              func(p *parked) { p.Spec = `[{"name":"other"}]` },
	}
	for name, forge := range forgeries {
		t.Run(name, func(t *testing.T) {
			p := *good
			p.Paths = append([]parkedPath(nil), good.Paths...)
			p.Held = append([]parkedCall(nil), good.Held...)
			forge(&p)
			state := encodeState(&p, snap)
			// What matters is that it returns.
			res, err := s.Resume(ctx, req, state, []Delivery{{ID: id, Out: json.RawMessage(`{"ok":1}`)}}, 0)
			t.Logf("%v %+v", err, res.Failure)
		})
	}
	// The untouched state still resumes, and the refused call nobody
	// awaited fails the run as it does in a run that never suspended.
	res, err = s.Resume(ctx, req, encodeState(good, snap), []Delivery{{ID: id, Out: json.RawMessage(`{"ok":1}`)}}, 0)
	direct := req
	direct.Suspend = false
	direct.Bindings = []Namespace{{Name: "tools", Members: [][]string{{"get"}}, Admit: func(c Call) (Work, error) {
		if c.Key == "get" {
			return func(context.Context) (json.RawMessage, error) { return json.RawMessage(`{"ok":1}`), nil }, nil
		}
		return nil, &CallError{Kind: "Refused", Message: "no such tool"}
	}}}
	want, _ := s.Run(ctx, direct)
	if err != nil || res.Failure == nil || want.Failure == nil || res.Failure.Message != want.Failure.Message ||
		res.Failure.Unawaited != want.Failure.Unawaited || res.Failure.Line != want.Failure.Line {
		t.Fatalf("resumed %+v %v\ndirect %+v", res.Failure, err, want.Failure)
	}
}

// TestSuspendBounds: a state is made with room after it for the bytes
// its caller appends, so appending them copies nothing; a run whose state
// would exceed MaxStateBytes fails with StateLimit instead of suspending.
func TestSuspendBounds(t *testing.T) {
	s := newSandbox(t)
	ctx := context.Background()
	req := Request{Program: `(async () => {
	const keep = Array.from({ length: 20000 }, (_, i) => ({ i, s: "row " + i }))
	await tools.get({})
	return keep.length
})()`, Bindings: holdGet, Suspend: true, Timeout: 5 * time.Second, StateRoom: 10_000}
	res, err := s.Run(ctx, req)
	if err != nil || res.Suspended == nil {
		t.Fatalf("not suspended: %+v %v", res, err)
	}
	state := res.Suspended.State.Snapshot
	if room := cap(state) - len(state); room < req.StateRoom {
		t.Errorf("room after the state: %d bytes, want at least %d", room, req.StateRoom)
	}
	req.MaxStateBytes = int64((len(state) + len(res.Suspended.State.Header)) / 2)
	res, err = s.Run(ctx, req)
	if err != nil || res.Suspended != nil || res.Failure == nil || res.Failure.Kind != StateLimit {
		t.Fatalf("over the cap: %+v %v, want a StateLimit failure", res.Failure, err)
	}
	if !strings.Contains(res.Failure.Message, fmt.Sprintf("limit of %d bytes", req.MaxStateBytes)) {
		t.Errorf("message %q does not name the cap", res.Failure.Message)
	}
}

// TestFinishedRunNotRetained: an instance kept for the next run holds
// nothing of the run that used it, so a suspended run's state (tens of
// megabytes, for a run holding much) is freed once its holder drops it.
func TestFinishedRunNotRetained(t *testing.T) {
	s := newSandbox(t)
	state := func() weak.Pointer[byte] {
		res, err := s.Run(context.Background(), Request{Program: `(async () => {
	const keep = Array.from({ length: 20000 }, (_, i) => ({ i, s: "row " + i }))
	await tools.get({})
	return keep.length
})()`, Bindings: holdGet, Suspend: true, Timeout: 5 * time.Second})
		if err != nil || res.Suspended == nil {
			t.Fatalf("not suspended: %+v %v", res, err)
		}
		return weak.Make(&res.Suspended.State.Snapshot[0])
	}()
	runtime.GC()
	runtime.GC()
	if state.Value() != nil {
		t.Fatal("the state is still reachable after the run ended and its result was dropped")
	}
}
