package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Values keeps JSON values by session and key, from one run of a session
// to the next (the values programs keep with tools.$codemode.store).
// Implementations are safe for concurrent use and check keys and values
// themselves (see CheckKey and MaxValueBytes), whoever calls them.
//
// Writes to one key are last-writer-wins: of two Puts to a key, the one
// that is applied second is what Get returns. A session's quotas hold
// whatever the order: no interleaving of Puts takes a session past them.
// Keys reads a per-session index, never a listing of every key of every
// session, so its cost is that of the session, not of the store.
type Values interface {
	// Get returns a key's value, with ok false when the session has no
	// such key.
	Get(ctx context.Context, session, key string) (value json.RawMessage, ok bool, err error)
	// Put sets a key's value; a nil (or empty) value deletes the key,
	// which is not an error when it is absent. Put fails with ErrFull
	// when the value would take the session past a quota, ErrBadKey or
	// ErrTooLarge when the key or value could never be kept.
	Put(ctx context.Context, session, key string, value json.RawMessage) error
	// Keys lists a session's keys, sorted, and an empty (not nil) list
	// when it has none.
	Keys(ctx context.Context, session string) ([]string, error)
	// Drop deletes all of a session's values, when the session ends:
	// values of sessions that will never come back would otherwise
	// stay. Dropping a session with no values is not an error.
	Drop(ctx context.Context, session string) error
}

// Limits of a key and a value, whatever the Values.
const (
	// MaxKeyBytes is the longest key, in bytes of UTF-8.
	MaxKeyBytes = 256
	// MaxValueBytes is the largest value, in bytes of JSON.
	MaxValueBytes = 64 << 10
)

// Errors of a Values.
var (
	// ErrFull: the value would take its session past the number of keys
	// or bytes the session may keep. Deleting keys (putting a nil value)
	// makes room.
	ErrFull = errors.New("store: the session's values are full")
	// ErrBadKey: the key cannot name a value (see CheckKey).
	ErrBadKey = errors.New("store: not a valid key")
	// ErrTooLarge: the value is longer than MaxValueBytes.
	ErrTooLarge = errors.New("store: the value is too large")
)

// CheckKey accepts the keys values have: 1 to MaxKeyBytes bytes of valid
// UTF-8 without NUL. Keys are the text programs choose; refusing NUL and
// broken UTF-8 keeps two different keys from reaching a store, a log or a
// JSON document as the same text.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: it is empty", ErrBadKey)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: it is %d bytes long; a key may have %d", ErrBadKey, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: it is not valid UTF-8", ErrBadKey)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: it holds a NUL", ErrBadKey)
	}
	return nil
}

// checkPut checks what every Put is given.
func checkPut(key string, value json.RawMessage) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if len(value) > MaxValueBytes {
		return fmt.Errorf("%w: it is %d bytes of JSON; a value may have %d", ErrTooLarge, len(value), MaxValueBytes)
	}
	return nil
}

// Quotas a session has when none are given.
const (
	defaultMaxKeys  = 1000
	defaultMaxBytes = 1 << 20
)

func quotas(maxKeys, maxBytes int) (int, int) {
	if maxKeys <= 0 {
		maxKeys = defaultMaxKeys
	}
	if maxBytes <= 0 {
		maxBytes = defaultMaxBytes
	}
	return maxKeys, maxBytes
}

// checkQuota decides whether a session holding keys keys and bytes bytes
// (keys and values) may take a value of n bytes under key, which it holds
// already when had (with old bytes of value).
func checkQuota(maxKeys, maxBytes, keys, bytes int, key string, n int, had bool, old int) error {
	if had {
		bytes -= len(key) + old
	} else if keys >= maxKeys {
		return fmt.Errorf("%w: it has %d keys, the most it may have; delete some (put a nil value) to make room", ErrFull, keys)
	}
	if bytes+len(key)+n > maxBytes {
		return fmt.Errorf("%w: the value would take it past %d bytes of keys and values; delete some (put a nil value) to make room", ErrFull, maxBytes)
	}
	return nil
}

// Index is a session's keys and the bytes of each key's value: what a
// Values kept in a key-value store reads, checks a write against
// (Admit) and replaces by compare-and-swap, so that the session's quotas
// hold across processes.
type Index map[string]int

// Admit checks that the session may hold a value of n bytes under key
// (replacing the one it has), with at most maxKeys keys and maxBytes
// bytes of keys and values; zero (or less) means 1,000 keys and 1 MiB.
// It returns an error wrapping ErrFull when not.
func (x Index) Admit(maxKeys, maxBytes int, key string, n int) error {
	maxKeys, maxBytes = quotas(maxKeys, maxBytes)
	bytes := 0
	for k, v := range x {
		bytes += len(k) + v
	}
	old, had := x[key]
	return checkQuota(maxKeys, maxBytes, len(x), bytes, key, n, had, old)
}
