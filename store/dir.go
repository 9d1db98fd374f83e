package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// DirRuns is a Runs in a directory, shared by the processes of a machine
// (codemode run --suspend-dir and codemode resume keep their records in
// one). Each run has a directory of its own holding one file per
// revision; a write links a complete file under the next revision's name,
// which the file system lets exactly one writer do, so the
// compare-and-swap holds across processes without a lock that a crashed
// process could leave behind. Every revision's file is kept until the
// record is deleted: a name freed by removing an old revision could be
// taken by a writer that read it long ago, which would then believe it had
// won.
type DirRuns struct {
	dir string
}

// OpenDirRuns opens (making it, mode 0700, when missing) a directory of
// run records. It refuses a path that is a symbolic link or not a
// directory.
func OpenDirRuns(dir string) (*DirRuns, error) {
	if err := openDir(dir); err != nil {
		return nil, err
	}
	return &DirRuns{dir: dir}, nil
}

// openDir makes a store's directory (mode 0700) when it is missing, and
// refuses a path that is a symbolic link or not a directory.
func openDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (a symbolic link is not followed)", errRefused, dir)
	}
	return nil
}

// Dir returns the directory.
func (d *DirRuns) Dir() string { return d.dir }

// revision files are named by zero-padded revision, so that names sort
// as numbers; a tombstone marks a deleted record until its directory is
// gone.
const revDigits = 20

type dirRecord struct {
	Run     *Run `json:"run,omitempty"`
	Deleted bool `json:"deleted,omitempty"`
}

func (d *DirRuns) runDir(id string) (string, error) {
	if err := CheckID(id); err != nil {
		return "", err
	}
	return filepath.Join(d.dir, id), nil
}

func revName(rev uint64) string { return fmt.Sprintf("%0*d", revDigits, rev) }

// Get implements Runs.
func (d *DirRuns) Get(_ context.Context, id string) (Run, uint64, error) {
	rd, err := d.runDir(id)
	if err != nil {
		return Run{}, 0, err
	}
	// An older revision may be removed between listing and reading it:
	// list again.
	for range 5 {
		rev, err := latest(rd)
		if err != nil {
			return Run{}, 0, err
		}
		if rev == 0 {
			return Run{}, 0, fmt.Errorf("%w: run %s", ErrNotFound, id)
		}
		b, err := os.ReadFile(filepath.Join(rd, revName(rev)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Run{}, 0, fmt.Errorf("store: %w", err)
		}
		var rec dirRecord
		if err := json.Unmarshal(b, &rec); err != nil || (rec.Run == nil && !rec.Deleted) {
			return Run{}, 0, fmt.Errorf("store: the record of run %s (revision %d) is damaged", id, rev)
		}
		if rec.Deleted {
			return Run{}, 0, fmt.Errorf("%w: run %s", ErrNotFound, id)
		}
		return *rec.Run, rev, nil
	}
	return Run{}, 0, fmt.Errorf("%w: run %s keeps changing", ErrConflict, id)
}

// latest returns the highest revision in a run's directory, 0 when there
// is none (or no directory).
func latest(rd string) (uint64, error) {
	entries, err := os.ReadDir(rd)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	var top uint64
	for _, e := range entries {
		if len(e.Name()) != revDigits || !e.Type().IsRegular() {
			continue
		}
		if n, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && n > top {
			top = n
		}
	}
	return top, nil
}

// Create implements Runs.
func (d *DirRuns) Create(_ context.Context, id string, r Run) (uint64, error) {
	rd, err := d.runDir(id)
	if err != nil {
		return 0, err
	}
	if err := os.Mkdir(rd, 0o700); errors.Is(err, fs.ErrExist) {
		return 0, fmt.Errorf("%w: run %s", ErrExists, id)
	} else if err != nil {
		return 0, fmt.Errorf("store: %w", err)
	}
	if err := put(rd, 1, dirRecord{Run: &r}); err != nil {
		return 0, err
	}
	return 1, nil
}

// Update implements Runs.
func (d *DirRuns) Update(_ context.Context, id string, r Run, rev uint64) (uint64, error) {
	rd, err := d.runDir(id)
	if err != nil {
		return 0, err
	}
	if err := swap(rd, id, rev, dirRecord{Run: &r}); err != nil {
		return 0, err
	}
	return rev + 1, nil
}

// Delete implements Runs.
func (d *DirRuns) Delete(_ context.Context, id string, rev uint64) error {
	rd, err := d.runDir(id)
	if err != nil {
		return err
	}
	if err := swap(rd, id, rev, dirRecord{Deleted: true}); err != nil {
		return err
	}
	// The tombstone has won; the directory may go. It is moved aside in
	// one step first, so a writer that read an older revision finds no
	// directory to link into rather than one half removed.
	trash := filepath.Join(d.dir, fmt.Sprintf(".deleted-%s-%d", id, os.Getpid()))
	if err := os.Rename(rd, trash); err == nil {
		_ = os.RemoveAll(trash)
	}
	return nil
}

// swap writes revision rev+1 if rev is the latest.
func swap(rd, id string, rev uint64, rec dirRecord) error {
	cur, err := latest(rd)
	if err != nil {
		return err
	}
	if rev == 0 || cur != rev {
		return fmt.Errorf("%w: run %s is at revision %d, not %d", ErrConflict, id, cur, rev)
	}
	if err := put(rd, rev+1, rec); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: run %s", ErrConflict, id)
		}
		return err
	}
	return nil
}

// beforeLink, when set (by tests), runs between a write's check of the
// latest revision and its link of the next.
var beforeLink func()

// put writes a complete record under revision rev, failing with
// fs.ErrExist when another writer got there first.
func put(rd string, rev uint64, rec dirRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	f, err := os.CreateTemp(rd, ".new-*")
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if beforeLink != nil {
		beforeLink()
	}
	// Link fails if the name exists: of the writers racing for a
	// revision, one wins.
	if err := os.Link(f.Name(), filepath.Join(rd, revName(rev))); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) && (errors.Is(le.Err, fs.ErrExist) || errors.Is(le.Err, fs.ErrNotExist)) {
			return le.Err
		}
		return fmt.Errorf("store: %w", err)
	}
	syncDir(rd)
	return nil
}

// syncDir makes a new name durable where the system allows it.
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}
