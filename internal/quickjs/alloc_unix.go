//go:build unix

package quickjs

import (
	"sync"
	"syscall"
)

// reservedMemory backs one instance's linear memory with a single
// reservation of its hard cap, made once with MAP_NORESERVE: growing never
// copies (wazero's default allocator copies on every grow, so resident
// memory reached several times the guest size), and untouched pages cost
// nothing.
//
// Free does not unmap. wazero may call Free from its close watcher while
// guest code is still running on another goroutine; unmapping then would
// fault the process. The owner calls release after the module is closed.
type reservedMemory struct {
	mu   sync.Mutex
	buf  []byte // the whole reservation; len == hard cap
	used uint64
}

func newReservedMemory(capBytes uint64) (*reservedMemory, error) {
	b, err := syscall.Mmap(-1, 0, int(capBytes),
		syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	return &reservedMemory{buf: b}, nil
}

// Reallocate implements experimental.LinearMemory. A request beyond the
// reservation returns nil, which the guest sees as a failed memory.grow:
// the hard page cap.
func (m *reservedMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf == nil || size > uint64(len(m.buf)) {
		return nil
	}
	m.used = size
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory; see the type comment.
func (m *reservedMemory) Free() {}

// release unmaps the reservation. Call only after the module is closed and
// no guest code can run.
func (m *reservedMemory) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}
