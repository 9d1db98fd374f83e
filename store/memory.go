package store

import (
	"context"
	"fmt"
	"sync"
)

// MemoryRuns is a Runs in this process's memory. The zero value is ready
// to use.
type MemoryRuns struct {
	mu   sync.Mutex
	runs map[string]memRun
}

type memRun struct {
	r   Run
	rev uint64
}

// Get implements Runs.
func (m *MemoryRuns) Get(_ context.Context, id string) (Run, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.runs[id]
	if !ok {
		return Run{}, 0, fmt.Errorf("%w: run %s", ErrNotFound, id)
	}
	return e.r, e.rev, nil
}

// Create implements Runs.
func (m *MemoryRuns) Create(_ context.Context, id string, r Run) (uint64, error) {
	if err := CheckID(id); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.runs[id]; ok {
		return 0, fmt.Errorf("%w: run %s", ErrExists, id)
	}
	if m.runs == nil {
		m.runs = map[string]memRun{}
	}
	m.runs[id] = memRun{r, 1}
	return 1, nil
}

// Update implements Runs.
func (m *MemoryRuns) Update(_ context.Context, id string, r Run, rev uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.runs[id]
	if !ok || e.rev != rev {
		return 0, fmt.Errorf("%w: run %s", ErrConflict, id)
	}
	m.runs[id] = memRun{r, rev + 1}
	return rev + 1, nil
}

// Delete implements Runs.
func (m *MemoryRuns) Delete(_ context.Context, id string, rev uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.runs[id]
	if !ok || e.rev != rev {
		return fmt.Errorf("%w: run %s", ErrConflict, id)
	}
	delete(m.runs, id)
	return nil
}

// Len returns how many records there are.
func (m *MemoryRuns) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.runs)
}
