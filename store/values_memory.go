package store

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
)

// MemoryValues is a Values in this process's memory, bounded per session.
// A session with no values takes no memory: deleting its last key forgets
// it. The zero value is ready to use, with the default quotas.
type MemoryValues struct {
	maxKeys, maxBytes int

	mu       sync.Mutex
	sessions map[string]*memSession
}

type memSession struct {
	values map[string]json.RawMessage
	bytes  int // of keys and values
}

// NewMemoryValues makes a MemoryValues keeping at most maxKeys keys and
// maxBytes bytes of keys and values per session; zero (or less) means
// 1,000 keys and 1 MiB.
func NewMemoryValues(maxKeys, maxBytes int) *MemoryValues {
	maxKeys, maxBytes = quotas(maxKeys, maxBytes)
	return &MemoryValues{maxKeys: maxKeys, maxBytes: maxBytes, sessions: map[string]*memSession{}}
}

// Get implements Values. The value returned is the caller's own copy.
func (m *MemoryValues) Get(_ context.Context, session, key string) (json.RawMessage, bool, error) {
	if err := CheckKey(key); err != nil {
		return nil, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[session]
	if s == nil {
		return nil, false, nil
	}
	v, ok := s.values[key]
	if !ok {
		return nil, false, nil
	}
	return slices.Clone(v), true, nil
}

// Put implements Values. It keeps a copy of the value.
func (m *MemoryValues) Put(_ context.Context, session, key string, value json.RawMessage) error {
	if err := checkPut(key, value); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[session]
	if len(value) == 0 {
		if s == nil {
			return nil
		}
		if old, had := s.values[key]; had {
			delete(s.values, key)
			s.bytes -= len(key) + len(old)
		}
		if len(s.values) == 0 {
			delete(m.sessions, session)
		}
		return nil
	}
	if s == nil {
		s = &memSession{values: map[string]json.RawMessage{}}
	}
	old, had := s.values[key]
	maxKeys, maxBytes := quotas(m.maxKeys, m.maxBytes)
	if err := checkQuota(maxKeys, maxBytes, len(s.values), s.bytes, key, len(value), had, len(old)); err != nil {
		return err
	}
	if m.sessions == nil {
		m.sessions = map[string]*memSession{}
	}
	m.sessions[session] = s
	s.values[key] = slices.Clone(value)
	s.bytes += len(value) - len(old)
	if !had {
		s.bytes += len(key)
	}
	return nil
}

// Keys implements Values.
func (m *MemoryValues) Keys(_ context.Context, session string) ([]string, error) {
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

// Drop implements Values.
func (m *MemoryValues) Drop(_ context.Context, session string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, session)
	return nil
}

// Sessions returns how many sessions have values: what a host's footprint
// grows with as sessions come and go.
func (m *MemoryValues) Sessions() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}
