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

// The built-in state tools' names, below SearchNamespace.
var stateTools = []string{"store", "load", "keys"}

// stateTool serves one of the built-in state tools for a session.
func (rt *Runtime) stateTool(name, session string) func(context.Context, json.RawMessage) (any, error) {
	st := rt.opts.Store
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in struct {
			Key   *string         `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		_ = json.Unmarshal(raw, &in)
		if name != "keys" {
			switch {
			case in.Key == nil:
				return nil, ToolError("pass { key } (a string)")
			case *in.Key == "" || len(*in.Key) > MaxStateKeyBytes || !utf8.ValidString(*in.Key):
				return nil, ToolError(fmt.Sprintf("a key is a string of 1 to %d bytes", MaxStateKeyBytes))
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
