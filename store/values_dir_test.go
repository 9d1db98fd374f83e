package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDirValuesAcrossProcesses: processes racing to fill one session
// never take it past its quotas, and every write acknowledged is there.
func TestDirValuesAcrossProcesses(t *testing.T) {
	if os.Getenv("STORE_VALUES_DIR") != "" {
		return // the child's own run of this test
	}
	rounds := []struct {
		name              string
		maxKeys, maxBytes int
		size              int // of each value
	}{
		{"keys", 12, 0, 20},
		{"bytes", 0, 1000, 90},
	}
	for _, round := range rounds {
		t.Run(round.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "values")
			var cmds []*exec.Cmd
			var outs []*strings.Builder
			var starts []io.WriteCloser
			for child := range 4 {
				cmd := exec.Command(os.Args[0], "-test.run=^TestDirValuesChild$")
				cmd.Env = append(os.Environ(), "STORE_VALUES_DIR="+dir, fmt.Sprintf("STORE_VALUES_CHILD=%d", child),
					fmt.Sprintf("STORE_VALUES_QUOTA=%d,%d,%d", round.maxKeys, round.maxBytes, round.size))
				var out strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &out
				start, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, outs, starts = append(cmds, cmd), append(outs, &out), append(starts, start)
			}
			// Children wait for their stdin to close, so that they start
			// writing together.
			for _, s := range starts {
				_ = s.Close()
			}
			var acked []string
			full := 0
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("child: %v\n%s", err, outs[i])
				}
				for line := range strings.Lines(outs[i].String()) {
					switch f := strings.Fields(line); {
					case len(f) == 2 && f[0] == "OK":
						acked = append(acked, f[1])
					case len(f) == 2 && f[0] == "FULL":
						full++
					}
				}
			}
			if full == 0 {
				t.Fatal("no write met the quota: the round tests nothing")
			}
			v, err := OpenDirValues(dir, round.maxKeys, round.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(acked)
			wantKeys(t, v, "s", acked...)
			total := 0
			for _, k := range acked {
				wantGet(t, v, "s", k, childValue(k, round.size))
				total += len(k) + round.size
			}
			if round.maxKeys > 0 && len(acked) != round.maxKeys {
				t.Errorf("%d keys, want %d (the quota)", len(acked), round.maxKeys)
			}
			if round.maxBytes > 0 && total > round.maxBytes {
				t.Errorf("%d bytes, past the quota of %d", total, round.maxBytes)
			}
		})
	}
}

func childValue(key string, size int) string {
	return jsonOfLen(size, key[1])
}

func TestDirValuesChild(t *testing.T) {
	dir := os.Getenv("STORE_VALUES_DIR")
	if dir == "" {
		t.Skip("run by TestDirValuesAcrossProcesses")
	}
	var maxKeys, maxBytes, size int
	fmt.Sscanf(os.Getenv("STORE_VALUES_QUOTA"), "%d,%d,%d", &maxKeys, &maxBytes, &size)
	v, err := OpenDirValues(dir, maxKeys, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	for i := range 8 {
		key := fmt.Sprintf("c%s-%d", os.Getenv("STORE_VALUES_CHILD"), i)
		err := v.Put(context.Background(), "s", key, json.RawMessage(childValue(key, size)))
		switch {
		case err == nil:
			fmt.Println("OK", key)
		case errors.Is(err, ErrFull):
			fmt.Println("FULL", key)
		default:
			t.Fatal(err)
		}
	}
}

// TestDirValuesStaleWriterLoses: a writer that read an old revision of
// the index, and finds its next name free because pruning removed it,
// learns that it lost, and its revision is never read.
func TestDirValuesStaleWriterLoses(t *testing.T) {
	d, err := OpenDirValues(t.TempDir(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, d, "s", "a", `1`)
	name, _ := sessionName("s")
	s, err := d.open(name, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	rev, x, err := s.top()
	if err != nil {
		t.Fatal(err)
	}
	file, err := s.newValue([]byte(`"stale"`))
	if err != nil {
		t.Fatal(err)
	}
	stale := x.next()
	stale.Keys["b"] = dirItem{File: file, Size: len(`"stale"`)}

	for i := 2; i <= 4; i++ {
		mustPut(t, d, "s", "a", strconv.Itoa(i))
	}
	if _, err := s.r.Lstat(filepath.Join(indexDir, revName(rev+1))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("revision %d was not pruned (%v): the test tests nothing", rev+1, err)
	}
	won, err := s.commit(rev+1, stale)
	if err != nil || won {
		t.Fatalf("the stale commit: got won %v, err %v; want it lost", won, err)
	}
	if _, err := s.r.Lstat(filepath.Join(indexDir, revName(rev+1))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stale revision was left behind: %v", err)
	}
	wantKeys(t, d, "s", "a")
	wantGet(t, d, "s", "a", `4`)

	// A writer that did win, and was built on, knows it.
	rev, x, _ = s.top()
	next := x.next()
	next.Keys["b"] = dirItem{File: file, Size: len(`"stale"`)}
	if won, err := s.commit(rev+1, next); err != nil || !won {
		t.Fatalf("a fresh commit: got won %v, err %v", won, err)
	}
	for i := 5; i <= 8; i++ {
		mustPut(t, d, "s", "a", strconv.Itoa(i))
	}
	if ok, err := s.chained(rev+1, next.Nonce); err != nil || !ok {
		t.Fatalf("chained after later writes: got %v, %v; want true", ok, err)
	}
	wantGet(t, d, "s", "b", `"stale"`)
}

func TestDirValuesRefusesLinks(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "values")
	d, err := OpenDirValues(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	secret := filepath.Join(elsewhere, "secret")
	if err := os.WriteFile(secret, []byte(`"secret"`), 0o600); err != nil {
		t.Fatal(err)
	}
	name, _ := sessionName("linked")
	if err := os.Symlink(elsewhere, filepath.Join(dir, name)); err != nil {
		t.Skip("no symbolic links here:", err)
	}

	t.Run("session directory", func(t *testing.T) {
		ops := map[string]func() error{
			"put":    func() error { return d.Put(ctx, "linked", "k", json.RawMessage(`1`)) },
			"delete": func() error { return d.Put(ctx, "linked", "k", nil) },
			"get":    func() error { _, _, err := d.Get(ctx, "linked", "k"); return err },
			"keys":   func() error { _, err := d.Keys(ctx, "linked"); return err },
			"drop":   func() error { return d.Drop(ctx, "linked") },
		}
		for op, f := range ops {
			if err := f(); !errors.Is(err, errRefused) {
				t.Errorf("%s: got %v, want it refused", op, err)
			}
		}
		if entries, _ := os.ReadDir(elsewhere); len(entries) != 1 {
			t.Errorf("the link's target was written: %v", entries)
		}
	})

	t.Run("value file", func(t *testing.T) {
		mustPut(t, d, "s", "k", `"mine!!!"`)
		sn, _ := sessionName("s")
		s, err := d.open(sn, false)
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		_, x, err := s.top()
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, sn, x.Keys["k"].File)
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, file); err != nil {
			t.Fatal(err)
		}
		if v, _, err := d.Get(ctx, "s", "k"); !errors.Is(err, errRefused) {
			t.Fatalf("got %s, %v; want it refused", v, err)
		}
	})

	t.Run("index directory", func(t *testing.T) {
		mustPut(t, d, "t", "k", `1`)
		tn, _ := sessionName("t")
		index := filepath.Join(dir, tn, indexDir)
		if err := os.Rename(index, index+"2"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(indexDir+"2", index); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Keys(ctx, "t"); !errors.Is(err, errRefused) {
			t.Errorf("keys: got %v, want it refused", err)
		}
		if err := d.Put(ctx, "t", "j", json.RawMessage(`1`)); !errors.Is(err, errRefused) {
			t.Errorf("put: got %v, want it refused", err)
		}
	})

	t.Run("store directory", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(dir, link); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenDirValues(link, 0, 0); err == nil {
			t.Fatal("a symbolic link was opened as a directory of values")
		}
	})
}

// TestDirValuesFiles: what a session leaves on disk, and with which
// permissions.
func TestDirValuesFiles(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "values")
	d, err := OpenDirValues(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, d, "s", "nothing", "")
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("deleting from a session with no values left %v", entries)
	}
	small, err := OpenDirValues(dir, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := small.Put(ctx, "s", "k", json.RawMessage(jsonOfLen(10, 'a'))); !errors.Is(err, ErrFull) {
		t.Fatalf("a value past the quota of an empty session: got %v, want ErrFull", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a value no session could hold left %v", entries)
	}
	for i := range 5 {
		mustPut(t, d, "s", "k", strconv.Itoa(i))
		mustPut(t, d, "s", fmt.Sprint("k", i), `1`)
	}
	mustPut(t, d, "s", "k0", "")
	sn, _ := sessionName("s")
	var files, revisions int
	err = filepath.WalkDir(filepath.Join(dir, sn), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		perm := fs.FileMode(0o600)
		switch {
		case e.IsDir():
			perm = 0o700
		case filepath.Base(filepath.Dir(p)) == indexDir:
			revisions++
		default:
			files++
		}
		if runtime.GOOS != "windows" && fi.Mode().Perm()&^perm != 0 {
			t.Errorf("%s: mode %v, want at most %v", p, fi.Mode().Perm(), perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Replaced and deleted values leave no file; old revisions go.
	if files != 5 || revisions > 2 {
		t.Errorf("%d value files (want 5) and %d revisions (want at most 2)", files, revisions)
	}
	if err := d.Drop(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("drop left %v", entries)
	}
}

// TestDirValuesDamage: a damaged or planted session directory is an
// error, never a value from elsewhere nor a silent absence.
func TestDirValuesDamage(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		damage func(t *testing.T, s *session, top string, x dirIndex)
	}{
		{"value file removed", func(t *testing.T, s *session, _ string, x dirIndex) {
			if err := s.r.Remove(x.Keys["k"].File); err != nil {
				t.Fatal(err)
			}
		}},
		{"index not JSON", func(t *testing.T, s *session, top string, _ dirIndex) {
			if err := s.r.WriteFile(top, []byte("{"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"index naming a file outside the values", func(t *testing.T, s *session, top string, x dirIndex) {
			x.Keys["k"] = dirItem{File: filepath.Join("..", "..", "secret"), Size: len(`"secret"`)}
			b, _ := json.Marshal(x)
			if err := s.r.WriteFile(top, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"value of another size", func(t *testing.T, s *session, _ string, x dirIndex) {
			if err := s.r.WriteFile(x.Keys["k"].File, []byte(`"longer than it was"`), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "secret"), []byte(`"secret"`), 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := OpenDirValues(filepath.Join(root, "values"), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			mustPut(t, d, "s", "k", `"mine"`)
			name, _ := sessionName("s")
			s, err := d.open(name, false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			rev, x, err := s.top()
			if err != nil {
				t.Fatal(err)
			}
			tt.damage(t, s, filepath.Join(indexDir, revName(rev)), x)
			if v, ok, err := d.Get(ctx, "s", "k"); err == nil {
				t.Fatalf("get: got %s (ok %v), want an error", v, ok)
			}
		})
	}
}
