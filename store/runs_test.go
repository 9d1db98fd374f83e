package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirRunsAcrossProcesses: processes racing to take the same record
// in one directory: one wins.
func TestDirRunsAcrossProcesses(t *testing.T) {
	if os.Getenv("STORE_TAKE_DIR") != "" {
		return // the child's own run of this test
	}
	dir := filepath.Join(t.TempDir(), "runs")
	runs, err := OpenDirRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for round := range 3 {
		id := fmt.Sprintf("p%d", round)
		rev, err := runs.Create(ctx, id, Run{Step: 1})
		if err != nil {
			t.Fatal(err)
		}
		var cmds []*exec.Cmd
		var outs []*strings.Builder
		for range 4 {
			cmd := exec.Command(os.Args[0], "-test.run=^TestDirRunsChild$")
			cmd.Env = append(os.Environ(), "STORE_TAKE_DIR="+dir, "STORE_TAKE_ID="+id, fmt.Sprintf("STORE_TAKE_REV=%d", rev))
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs = append(cmds, cmd), append(outs, &out)
		}
		wins := 0
		for i, cmd := range cmds {
			_ = cmd.Wait()
			switch {
			case strings.Contains(outs[i].String(), "TOOK"):
				wins++
			case !strings.Contains(outs[i].String(), "CONFLICT"):
				t.Fatalf("child: %s", outs[i])
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d processes took the record", round, wins)
		}
	}
}

func TestDirRunsChild(t *testing.T) {
	dir := os.Getenv("STORE_TAKE_DIR")
	if dir == "" {
		t.Skip("run by TestDirRunsAcrossProcesses")
	}
	runs, err := OpenDirRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rev uint64
	fmt.Sscan(os.Getenv("STORE_TAKE_REV"), &rev)
	_, err = runs.Update(context.Background(), os.Getenv("STORE_TAKE_ID"), Run{Step: 1, TakenBy: fmt.Sprint(os.Getpid())}, rev)
	switch {
	case err == nil:
		fmt.Println("TOOK")
	case errors.Is(err, ErrConflict):
		fmt.Println("CONFLICT")
	default:
		t.Fatal(err)
	}
}

func TestOpenDirRunsRefusesLinks(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	if _, err := OpenDirRuns(link); err == nil {
		t.Fatal("a symbolic link was opened as a run directory")
	}
}

// TestDirRunsSlowWriter: a writer that checked the latest revision and
// then stalled (a slow sync) while two other writes went through must not
// win with a revision nobody reads.
func TestDirRunsSlowWriter(t *testing.T) {
	runs, err := OpenDirRuns(filepath.Join(t.TempDir(), "runs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rev, _ := runs.Create(ctx, "slow", Run{Step: 1})
	fast := func() {
		beforeLink = nil
		r2, err := runs.Update(ctx, "slow", Run{Step: 1, TakenBy: "fast"}, rev)
		if err != nil {
			t.Error(err)
		}
		if _, err := runs.Update(ctx, "slow", Run{Step: 2}, r2); err != nil {
			t.Error(err)
		}
	}
	beforeLink = fast
	t.Cleanup(func() { beforeLink = nil })
	if _, err := runs.Update(ctx, "slow", Run{Step: 1, TakenBy: "slow"}, rev); !errors.Is(err, ErrConflict) {
		t.Fatalf("the stalled writer: %v, want ErrConflict", err)
	}
	got, _, _ := runs.Get(ctx, "slow")
	if got.Step != 2 || got.TakenBy != "" {
		t.Fatalf("record %+v", got)
	}
}
