package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"
)

// DirValues is a Values in a directory, shared by the processes of a
// machine. Each session with values has a directory of its own, named by
// the SHA-256 of the session's name: session names are any text a host
// chooses, and a hash is a file name of fixed length, safe on every file
// system, those that ignore case included. In it:
//
//   - each value is a file of its own, written completely and synced
//     under a fresh random name, and never changed after. Named for its
//     key, a file would need up to 342 bytes of name for a 256-byte key
//     (most file systems allow 255), and two writers of one key would
//     race on the one file;
//   - index/ holds the session's index: a file per revision, mapping
//     each key to its value's file and size. The latest revision is the
//     session's values. Get reads it and then the value's file; Keys
//     reads it alone.
//
// A Put writes its value's file, then links a complete revision of the
// index under the next revision's number, which the file system lets one
// writer do: the compare-and-swap of DirRuns. The quotas are checked
// against the revision a write replaces, so no interleaving of processes
// takes a session past them, and writes to a key are last-writer-wins in
// the order of the revisions. A lock file would be as short to write but
// needs a rule for taking over the lock of a process that died, and no
// rule tells a dead process from a slow one; here a crash leaves at worst
// files that nothing reads (a value no revision names, half a Drop), and
// the next write goes on from the latest revision.
//
// Deleting a session's last key leaves its directory, with an index of
// no keys, until Drop. Where the store expects its own file or directory,
// a symbolic link (or anything else) is refused, not followed; the store
// makes directories mode 0700 and files 0600. Processes sharing a
// directory should open it with the same quotas: each enforces its own on
// the writes it makes.
type DirValues struct {
	dir               string
	maxKeys, maxBytes int

	// Writers in this process take turns per session (by stripe), so
	// that the compare-and-swap races only other processes' writers and
	// a write is not repeated for nothing.
	turns [turnStripes]sync.Mutex
}

const turnStripes = 64

// OpenDirValues opens (making it, mode 0700, when missing) a directory of
// session values, whose sessions keep at most maxKeys keys and maxBytes
// bytes of keys and values; zero (or less) means 1,000 keys and 1 MiB. It
// refuses a path that is a symbolic link or not a directory.
func OpenDirValues(dir string, maxKeys, maxBytes int) (*DirValues, error) {
	if err := openDir(dir); err != nil {
		return nil, err
	}
	maxKeys, maxBytes = quotas(maxKeys, maxBytes)
	return &DirValues{dir: dir, maxKeys: maxKeys, maxBytes: maxBytes}, nil
}

// Dir returns the directory.
func (d *DirValues) Dir() string { return d.dir }

// errRefused: a symbolic link, or a file of the wrong kind, where the
// store expects its own file or directory.
var errRefused = errors.New("store: not followed: a symbolic link or unexpected file in the store")

var (
	// errGone: the session's directory was removed under an operation
	// (Drop): the operation starts again in the session's new directory.
	errGone = errors.New("store: the session's directory is gone")
	// errUnknown: a write cannot tell whether it was kept.
	errUnknown = errors.New("store: whether the value was kept is not known: the session changed too often while it was put")
)

const (
	indexDir = "index"
	// keepNonces is how many revisions back a revision names its
	// predecessors (see session.chained).
	keepNonces = 256
	// maxIndexBytes bounds what is read as a revision of an index, so
	// that a planted file cannot take all memory: room for some 40,000
	// keys of the longest kind.
	maxIndexBytes = 64 << 20
	// putAttempts bounds how often a Put retries after losing a race.
	putAttempts = 1000
)

// sessionName returns the name of a session's directory and the stripe
// of its writers' turns.
func sessionName(session string) (string, int) {
	sum := sha256.Sum256([]byte(session))
	return hex.EncodeToString(sum[:]), int(sum[0]) % turnStripes
}

// dirIndex is a revision of a session's index.
type dirIndex struct {
	// Nonce tells this revision from another that took its name after
	// it was removed.
	Nonce string `json:"nonce"`
	// Prev are the nonces of the revisions before, newest first, at
	// most keepNonces of them ("" for revision 0, which has no file).
	Prev []string           `json:"prev"`
	Keys map[string]dirItem `json:"keys"`
}

type dirItem struct {
	File string `json:"file"`
	Size int    `json:"size"`
}

func (x *dirIndex) bytes() int {
	n := 0
	for k, it := range x.Keys {
		n += len(k) + it.Size
	}
	return n
}

// next starts the revision after x.
func (x *dirIndex) next() dirIndex {
	var b [8]byte
	_, _ = rand.Read(b[:])
	n := dirIndex{Nonce: hex.EncodeToString(b[:]), Keys: make(map[string]dirItem, len(x.Keys)+1)}
	n.Prev = append([]string{x.Nonce}, x.Prev...)
	n.Prev = n.Prev[:min(len(n.Prev), keepNonces)]
	for k, it := range x.Keys {
		n.Keys[k] = it
	}
	return n
}

// valid reports whether a revision read back is one the store writes, so
// that a damaged or planted index cannot name a file outside the values.
func (x *dirIndex) valid() bool {
	if !isNonce(x.Nonce) || len(x.Prev) > keepNonces {
		return false
	}
	for _, p := range x.Prev {
		if p != "" && !isNonce(p) {
			return false
		}
	}
	for k, it := range x.Keys {
		if CheckKey(k) != nil || !isValueFile(it.File) || it.Size < 1 || it.Size > MaxValueBytes {
			return false
		}
	}
	return true
}

func isNonce(s string) bool {
	if len(s) != 16 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// isValueFile reports whether name is one session.newValue makes: "v" and
// base32 text.
func isValueFile(name string) bool {
	if len(name) < 20 || len(name) > 64 || name[0] != 'v' {
		return false
	}
	for _, c := range name[1:] {
		if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// session is a session's directory, opened: every name is resolved in the
// directory opened even if it is renamed away meanwhile (by Drop), so one
// operation never mixes two incarnations of a session.
type session struct {
	path string
	r    *os.Root
}

// open opens a session's directory, making it when create is set; nil
// when it has none.
func (d *DirValues) open(name string, create bool) (*session, error) {
	p := filepath.Join(d.dir, name)
	for range 5 {
		if create {
			if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("store: %w", err)
			}
		}
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if create {
				continue
			}
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%w: %s", errRefused, p)
		}
		r, err := os.OpenRoot(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		// OpenRoot follows links: what it opened must be what Lstat saw.
		if rfi, err := r.Stat("."); err == nil && os.SameFile(fi, rfi) {
			return &session{path: p, r: r}, nil
		}
		_ = r.Close()
	}
	return nil, fmt.Errorf("store: the directory %s keeps changing", p)
}

func (s *session) close() { _ = s.r.Close() }

// dropped reports whether the session's name no longer leads to the
// directory opened.
func (s *session) dropped() bool {
	fi, err := os.Lstat(s.path)
	if err != nil {
		return true
	}
	rfi, err := s.r.Stat(".")
	return err != nil || !os.SameFile(fi, rfi)
}

// read reads a regular file of the session, no longer than limit; an
// error satisfying errors.Is(err, fs.ErrNotExist) when it is not there,
// or no longer the file it was when opened (a name the store removes
// may be taken again).
func (s *session) read(name string, limit int64) ([]byte, error) {
	// Lstat first, so that a link or a FIFO is never opened.
	fi, err := s.r.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s", errRefused, filepath.Join(s.path, name))
	}
	f, err := s.r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Open follows links: what it opened must be what Lstat saw.
	ofi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !os.SameFile(fi, ofi) {
		return nil, fmt.Errorf("%w: %s changed while it was opened", fs.ErrNotExist, filepath.Join(s.path, name))
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("store: %s is larger than the store writes", filepath.Join(s.path, name))
	}
	return b, nil
}

// create writes a new file completely and durably; it fails if the name
// is taken, by anything, a link included.
func (s *session) create(name string, b []byte) error {
	f, err := s.r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.r.Remove(name)
	}
	return err
}

// syncDir makes new names in a directory durable where the system
// allows it.
func (s *session) syncDir(name string) {
	if f, err := s.r.Open(name); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}

// latest returns the highest revision of the index, 0 when there is none.
func (s *session) latest() (uint64, error) {
	fi, err := s.r.Lstat(indexDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("%w: %s", errRefused, filepath.Join(s.path, indexDir))
	}
	f, err := s.r.Open(indexDir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if ofi, err := f.Stat(); err != nil || !os.SameFile(fi, ofi) {
		return 0, fmt.Errorf("%w: %s", errRefused, filepath.Join(s.path, indexDir))
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return 0, err
	}
	var top uint64
	for _, e := range entries {
		n, ok := revOf(e.Name())
		if !ok {
			continue
		}
		if !e.Type().IsRegular() {
			return 0, fmt.Errorf("%w: %s", errRefused, filepath.Join(s.path, indexDir, e.Name()))
		}
		top = max(top, n)
	}
	return top, nil
}

func revOf(name string) (uint64, bool) {
	if len(name) != revDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(name, 10, 64)
	return n, err == nil
}

// top returns the latest revision of the index and its number; revision
// 0, with no keys, when there is none.
func (s *session) top() (uint64, dirIndex, error) {
	// A revision may be removed between listing and reading it (a newer
	// one has come): list again.
	for range 10 {
		rev, err := s.latest()
		if err != nil {
			return 0, dirIndex{}, err
		}
		if rev == 0 {
			return 0, dirIndex{}, nil
		}
		name := filepath.Join(indexDir, revName(rev))
		b, err := s.read(name, maxIndexBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, dirIndex{}, err
		}
		var x dirIndex
		if err := json.Unmarshal(b, &x); err != nil || !x.valid() {
			return 0, dirIndex{}, fmt.Errorf("store: %s is damaged", filepath.Join(s.path, name))
		}
		return rev, x, nil
	}
	return 0, dirIndex{}, fmt.Errorf("store: the index in %s keeps changing", s.path)
}

// commit makes x revision rev of the index, if no other revision has
// taken that number, and reports whether it did.
func (s *session) commit(rev uint64, x dirIndex) (bool, error) {
	b, err := json.Marshal(x)
	if err != nil {
		return false, err
	}
	tmp := filepath.Join(indexDir, ".new-"+rand.Text())
	if err := s.create(tmp, b); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, errGone
		}
		return false, err
	}
	defer s.r.Remove(tmp)
	name := filepath.Join(indexDir, revName(rev))
	// Link fails if the name exists: of the writers racing for a
	// revision, one wins.
	if err := s.r.Link(tmp, name); err != nil {
		switch {
		case errors.Is(err, fs.ErrExist):
			return false, nil
		case errors.Is(err, fs.ErrNotExist):
			return false, errGone
		}
		return false, err
	}
	s.syncDir(indexDir)
	ok, err := s.chained(rev, x.Nonce)
	if err == nil && !ok {
		// The link took a name that pruning had freed: it lies below
		// the latest revision, where nobody reads it. Take it away,
		// unless someone else has taken the name since.
		a, aerr := s.r.Lstat(name)
		b, berr := s.r.Lstat(tmp)
		if aerr == nil && berr == nil && os.SameFile(a, b) {
			_ = s.r.Remove(name)
		}
	}
	return ok, err
}

// chained reports whether revision rev, just linked with nonce, is part of
// the index's history rather than a name that pruning freed and a writer
// who read an old revision took again (revisions below the latest are
// removed, so the link alone does not tell). The latest revision is never
// removed, and each names its predecessors' nonces: one of them is ours
// when later writers built on our revision. When more than keepNonces
// revisions came after ours before we looked, it cannot tell (errUnknown);
// writers in one process take turns, so that needs as many writes by
// other processes in that moment.
func (s *session) chained(rev uint64, nonce string) (bool, error) {
	top, x, err := s.top()
	switch {
	case err != nil:
		return false, err
	case top < rev:
		// Our revision is gone with all above it: the session is being
		// dropped, and the write goes as if made just before.
		return true, nil
	case top == rev:
		return x.Nonce == nonce, nil
	case top-rev <= uint64(len(x.Prev)):
		return x.Prev[top-rev-1] == nonce, nil
	}
	return false, errUnknown
}

// prune removes the revisions before rev, which no reader needs once
// rev+1 is in the history.
func (s *session) prune(rev uint64) {
	f, err := s.r.Open(indexDir)
	if err != nil {
		return
	}
	entries, err := f.ReadDir(-1)
	_ = f.Close()
	if err != nil {
		return
	}
	for _, e := range entries {
		if n, ok := revOf(e.Name()); ok && n < rev {
			_ = s.r.Remove(filepath.Join(indexDir, e.Name()))
		}
	}
}

// newValue writes a value to a file of its own and returns the file's
// name.
func (s *session) newValue(v []byte) (string, error) {
	name := "v" + rand.Text()
	if err := s.create(name, v); err != nil {
		return "", err
	}
	s.syncDir(".")
	return name, nil
}

// Get implements Values.
func (d *DirValues) Get(ctx context.Context, session, key string) (json.RawMessage, bool, error) {
	if err := CheckKey(key); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	name, _ := sessionName(session)
	s, err := d.open(name, false)
	if err != nil || s == nil {
		return nil, false, err
	}
	defer s.close()
	// A value's file is removed once a newer revision replaces it: read
	// the index again. Missing under the same revision twice, it is lost.
	var last uint64
	for i := range 10 {
		rev, x, err := s.top()
		if err != nil {
			return nil, false, err
		}
		it, ok := x.Keys[key]
		if !ok {
			return nil, false, nil
		}
		b, err := s.read(it.File, MaxValueBytes)
		if errors.Is(err, fs.ErrNotExist) {
			switch {
			case s.dropped():
				return nil, false, nil
			case i > 0 && rev == last:
				return nil, false, fmt.Errorf("store: the value of %q in %s is missing", key, s.path)
			}
			last = rev
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("store: %w", err)
		}
		if len(b) != it.Size {
			return nil, false, fmt.Errorf("store: the value of %q in %s is damaged", key, s.path)
		}
		return b, true, nil
	}
	return nil, false, fmt.Errorf("store: the value of %q in %s keeps changing", key, s.path)
}

// Put implements Values.
func (d *DirValues) Put(ctx context.Context, session, key string, value json.RawMessage) error {
	if err := checkPut(key, value); err != nil {
		return err
	}
	if len(value) > 0 {
		// A value no session could hold makes no directory.
		if err := checkQuota(d.maxKeys, d.maxBytes, 0, 0, key, len(value), false, 0); err != nil {
			return err
		}
	}
	name, turn := sessionName(session)
	d.turns[turn].Lock()
	defer d.turns[turn].Unlock()
	// A session dropped meanwhile has a new directory: start again there.
	for range 5 {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := d.open(name, len(value) > 0)
		if err != nil || s == nil {
			return err
		}
		err = d.put(ctx, s, key, value)
		s.close()
		if !errors.Is(err, errGone) {
			return err
		}
	}
	return fmt.Errorf("store: the directory of session values %s keeps being dropped", filepath.Join(d.dir, name))
}

// put makes a revision of the session's index that sets key.
func (d *DirValues) put(ctx context.Context, s *session, key string, value json.RawMessage) error {
	del := len(value) == 0
	if !del {
		if err := s.r.Mkdir(indexDir, 0o700); errors.Is(err, fs.ErrNotExist) {
			return errGone
		} else if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("store: %w", err)
		}
	}
	file, kept := "", false
	defer func() {
		if file != "" && !kept {
			_ = s.r.Remove(file)
		}
	}()
	for attempt := range putAttempts {
		if err := ctx.Err(); err != nil {
			return err
		}
		if attempt > 0 {
			// Another writer won the revision: let it finish.
			time.Sleep(time.Duration(mrand.IntN(1<<min(attempt, 10))) * time.Microsecond)
		}
		rev, x, err := s.top()
		if err != nil {
			return err
		}
		old, had := x.Keys[key]
		if del && !had {
			return nil
		}
		if !del {
			if err := checkQuota(d.maxKeys, d.maxBytes, len(x.Keys), x.bytes(), key, len(value), had, old.Size); err != nil {
				return err
			}
			if file == "" {
				if file, err = s.newValue(value); errors.Is(err, fs.ErrNotExist) {
					return errGone
				} else if err != nil {
					return fmt.Errorf("store: %w", err)
				}
			}
		}
		next := x.next()
		if del {
			delete(next.Keys, key)
		} else {
			next.Keys[key] = dirItem{File: file, Size: len(value)}
		}
		won, err := s.commit(rev+1, next)
		switch {
		case errors.Is(err, errUnknown):
			kept = true // a revision may name it
			return fmt.Errorf("%w (key %q, in %s)", err, key, s.path)
		case errors.Is(err, errGone):
			return err
		case err != nil:
			return fmt.Errorf("store: %w", err)
		case !won:
			continue
		}
		kept = true
		if had {
			// Only revisions before ours name it.
			_ = s.r.Remove(old.File)
		}
		s.prune(rev)
		return nil
	}
	return fmt.Errorf("store: the index in %s keeps changing", s.path)
}

// Keys implements Values.
func (d *DirValues) Keys(ctx context.Context, session string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name, _ := sessionName(session)
	s, err := d.open(name, false)
	if err != nil {
		return nil, err
	}
	keys := []string{}
	if s == nil {
		return keys, nil
	}
	defer s.close()
	_, x, err := s.top()
	if err != nil {
		return nil, err
	}
	for k := range x.Keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// Drop implements Values. It renames the session's directory away, so
// that the session is gone at once for every process, and then removes
// it.
func (d *DirValues) Drop(ctx context.Context, session string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name, turn := sessionName(session)
	d.turns[turn].Lock()
	defer d.turns[turn].Unlock()
	p := filepath.Join(d.dir, name)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s", errRefused, p)
	}
	trash := filepath.Join(d.dir, ".drop-"+rand.Text())
	if err := os.Rename(p, trash); errors.Is(err, fs.ErrNotExist) {
		return nil // dropped by someone else
	} else if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	// A writer that opened the directory before the rename may still
	// add a file to it, which makes a removal fail: remove again.
	for range 5 {
		if err = os.RemoveAll(trash); err == nil {
			return nil
		}
	}
	return fmt.Errorf("store: %w", err)
}
