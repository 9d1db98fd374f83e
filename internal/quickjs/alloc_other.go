//go:build !unix

package quickjs

import "sync"

// reservedMemory is the portable fallback: one Go allocation of the hard
// cap, which the Go runtime maps lazily on most systems.
type reservedMemory struct {
	mu  sync.Mutex
	buf []byte
}

func newReservedMemory(capBytes uint64) (*reservedMemory, error) {
	return &reservedMemory{buf: make([]byte, capBytes)}, nil
}

func (m *reservedMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf == nil || size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size:size]
}

func (m *reservedMemory) Free() {}

func (m *reservedMemory) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buf = nil
}
