package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// State across runs.
//
// With Options.Store set, programs get three more built-in tools that keep
// JSON values for their session (WithSession; runs without one share the
// empty session) from one run to the next:
//
//	await tools.$codemode.store({ key: "cursor", value: { page: 3 } })  // value null deletes
//	const { value } = await tools.$codemode.load({ key: "cursor" })     // null when absent
//	const { keys } = await tools.$codemode.keys()

// Store keeps the values programs store, by session and key. Values are
// JSON that has passed the data boundary and the size limits.
// Implementations must be safe for concurrent use.
type Store interface {
	Load(ctx context.Context, session, key string) (value json.RawMessage, ok bool, err error)
	// Store sets a key; a nil value deletes it.
	Store(ctx context.Context, session, key string, value json.RawMessage) error
	// Keys lists a session's keys, sorted.
	Keys(ctx context.Context, session string) ([]string, error)
}

// Forgetter is a Store that can drop a session's values at once. A host
// calls Forget when a session ends (the MCP server does), so that values
// of sessions that will never come back do not pile up; a Store that keeps
// values with a time to live of its own need not implement it.
type Forgetter interface {
	Forget(ctx context.Context, session string) error
}

// Limits of stored state, whatever the Store.
const (
	MaxStateKeyBytes   = 256
	MaxStateValueBytes = 64 << 10
)

// ErrStateFull is returned by a MemoryStore whose session is at its
// limit.
var ErrStateFull = errors.New("codemode: the session's stored state is full")

// MemoryStore is a Store in this process's memory, bounded per session.
// The zero value is not usable: make one with NewMemoryStore.
type MemoryStore struct {
	maxKeys, maxBytes int

	mu       sync.Mutex
	sessions map[string]*memSession
}

type memSession struct {
	values map[string]json.RawMessage
	bytes  int
}

// NewMemoryStore makes a MemoryStore keeping at most maxKeys keys and
// maxBytes of keys and values per session (zero: 1,000 keys, 1 MiB).
func NewMemoryStore(maxKeys, maxBytes int) *MemoryStore {
	if maxKeys <= 0 {
		maxKeys = 1000
	}
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	return &MemoryStore{maxKeys: maxKeys, maxBytes: maxBytes, sessions: map[string]*memSession{}}
}

// Load implements Store.
func (m *MemoryStore) Load(_ context.Context, session, key string) (json.RawMessage, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[session]
	if s == nil {
		return nil, false, nil
	}
	v, ok := s.values[key]
	return v, ok, nil
}

// Store implements Store.
func (m *MemoryStore) Store(_ context.Context, session, key string, value json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[session]
	if s == nil {
		if value == nil {
			return nil
		}
		s = &memSession{values: map[string]json.RawMessage{}}
		m.sessions[session] = s
	}
	old, had := s.values[key]
	size := s.bytes
	if had {
		size -= len(key) + len(old)
	}
	if value == nil {
		delete(s.values, key)
		s.bytes = size
		if len(s.values) == 0 {
			delete(m.sessions, session)
		}
		return nil
	}
	if !had && len(s.values) >= m.maxKeys {
		return fmt.Errorf("%w: it has %d keys, the most it may have; delete some (store null)", ErrStateFull, len(s.values))
	}
	if size+len(key)+len(value) > m.maxBytes {
		return fmt.Errorf("%w: the value would take it past %d bytes; delete some (store null)", ErrStateFull, m.maxBytes)
	}
	s.values[key] = append(json.RawMessage(nil), value...)
	s.bytes = size + len(key) + len(value)
	return nil
}

// Forget implements Forgetter: the session's values are dropped.
func (m *MemoryStore) Forget(_ context.Context, session string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, session)
	return nil
}

// Sessions returns how many sessions have values.
func (m *MemoryStore) Sessions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// Keys implements Store.
func (m *MemoryStore) Keys(_ context.Context, session string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := []string{}
	if s := m.sessions[session]; s != nil {
		for k := range s.values {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// stateTool serves one of the built-in state tools for a session.
func (rt *Runtime) stateTool(name, session string) func(context.Context, json.RawMessage) (any, error) {
	st := rt.opts.Store
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in struct {
			Key   *string         `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		var keyText struct {
			Key json.RawMessage `json:"key"`
		}
		_ = json.Unmarshal(raw, &in)
		_ = json.Unmarshal(raw, &keyText)
		if name != "keys" {
			switch {
			case in.Key == nil:
				return nil, ToolError("pass { key } (a string)")
			case *in.Key == "" || len(*in.Key) > MaxStateKeyBytes || !utf8.ValidString(*in.Key):
				return nil, ToolError(fmt.Sprintf("a key is a string of 1 to %d bytes", MaxStateKeyBytes))
			case loneSurrogate(keyText.Key):
				// Decoding turns every lone surrogate into U+FFFD, so
				// "\ud800" and "\udbff" would be one key.
				return nil, ToolError("a key may not hold a lone surrogate (half of a UTF-16 pair)")
			}
		}
		var err error
		switch name {
		case "load":
			v, ok, lerr := st.Load(ctx, session, *in.Key)
			if lerr != nil {
				return nil, lerr
			}
			if !ok {
				v = json.RawMessage("null")
			}
			return map[string]json.RawMessage{"value": v}, nil
		case "keys":
			keys, kerr := st.Keys(ctx, session)
			if kerr != nil {
				return nil, kerr
			}
			return map[string][]string{"keys": keys}, nil
		case "store":
			v := in.Value
			if len(v) == 0 || string(v) == "null" {
				v = nil
			} else if len(v) > MaxStateValueBytes {
				return nil, ToolError(fmt.Sprintf("the value is %d bytes of JSON; a stored value may have %d", len(v), MaxStateValueBytes))
			}
			err = st.Store(ctx, session, *in.Key, v)
			if errors.Is(err, ErrStateFull) {
				return nil, ToolError(strings.TrimPrefix(err.Error(), "codemode: "))
			}
		}
		if err != nil {
			return nil, err
		}
		return map[string]bool{"ok": true}, nil
	}
}

// loneSurrogate reports whether a JSON string's text escapes a UTF-16
// surrogate that is not half of a pair.
func loneSurrogate(s json.RawMessage) bool {
	for i := 0; i+5 < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if s[i+1] != 'u' {
			i++ // an escaped character, maybe a backslash
			continue
		}
		u, ok := hex4(s[i+2 : i+6])
		switch {
		case !ok:
		case u >= 0xDC00 && u <= 0xDFFF:
			return true // a low half with no high half before it
		case u >= 0xD800 && u <= 0xDBFF:
			if i+11 >= len(s) || s[i+6] != '\\' || s[i+7] != 'u' {
				return true
			}
			if lo, ok := hex4(s[i+8 : i+12]); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6 // the pair's low half
		}
		i += 5
	}
	return false
}

func hex4(b json.RawMessage) (rune, bool) {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
