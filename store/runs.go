package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Run is the record of a suspended run.
type Run struct {
	// Step is the step the run is at: the Step of the Suspended that holds
	// its current state.
	Step int `json:"step"`
	// Sum is the hex SHA-256 of that step's state: the record admits this
	// state and no other.
	Sum string `json:"sum"`
	// State is the step's state itself, for a host that keeps states in
	// the run store and hands out references to them (codemode.Steps with
	// KeepStates); nil for one that keeps them elsewhere.
	State []byte `json:"state,omitempty"`
	// TakenBy, when not empty, names who took the step to run it, at
	// TakenAt. A taken step is never handed out again: its calls may have
	// been made.
	TakenBy string    `json:"takenBy,omitempty"`
	TakenAt time.Time `json:"takenAt,omitzero"`
}

// Runs keeps the records of suspended runs by run id. Implementations are
// safe for concurrent use, and Update and Delete are compare-and-swap
// operations: they succeed only when the record is still at the revision
// given, which they replace.
type Runs interface {
	// Get returns a run's record and its revision, or ErrNotFound.
	Get(ctx context.Context, id string) (Run, uint64, error)
	// Create stores the record of a new run and returns its revision, or
	// ErrExists when the id has a record.
	Create(ctx context.Context, id string, r Run) (uint64, error)
	// Update replaces a record at revision rev and returns the new
	// revision; ErrConflict when the record has another revision (or no
	// record is there any more).
	Update(ctx context.Context, id string, r Run, rev uint64) (uint64, error)
	// Delete removes a record at revision rev; ErrConflict when the
	// record has another revision (or is gone already).
	Delete(ctx context.Context, id string, rev uint64) error
}

// Errors of a Runs.
var (
	// ErrNotFound: no record has the id.
	ErrNotFound = errors.New("store: no such record")
	// ErrExists: Create found a record with the id.
	ErrExists = errors.New("store: the record exists")
	// ErrConflict: the record is not at the revision given.
	ErrConflict = errors.New("store: the record has changed")
	// ErrBadID: the id cannot name a record (see CheckID).
	ErrBadID = errors.New("store: not a valid record id")
)

// MaxIDBytes is the longest record id.
const MaxIDBytes = 128

// CheckID accepts the ids records have: 1 to MaxIDBytes ASCII letters,
// digits, '-' and '_' (codemode's run ids are hexadecimal), so that an id
// is a safe file name and key in any store.
func CheckID(id string) error {
	if id == "" || len(id) > MaxIDBytes {
		return fmt.Errorf("%w: %q", ErrBadID, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: %q", ErrBadID, id)
		}
	}
	return nil
}
