package quickjs

import (
	"errors"
	"fmt"
)

// Guest memory lives here. Guest pointers are uint32 offsets into the
// instance's linear memory; every access goes through wazero's
// bounds-checked api.Memory.

func (in *Instance) malloc(n uint32) (uint32, error) {
	p, err := in.call(xMalloc, uint64(n))
	if err != nil {
		return 0, err
	}
	if p == 0 {
		return 0, ErrOutOfMemory
	}
	return uint32(p), nil
}

func (in *Instance) freeGuest(p uint32) {
	if p != 0 && !in.inScratch(p) {
		_, _ = in.call(xFree, uint64(p))
	}
}

// The scratch buffer is one guest allocation per instance for the small
// buffers every call needs (an out-parameter, an argument vector, a short
// string), so a bridge crossing costs one export call instead of three.
// Each region is consumed by the export it is passed to before any guest
// code can run and call back into the host, so reuse is safe.
const (
	scratchSize    = 4096
	scratchLen     = 0   // 4 bytes: length out-parameter
	scratchArgv    = 8   // up to maxScratchArgs argument pointers
	scratchString  = 128 // short strings, NUL-terminated
	maxScratchArgs = (scratchString - scratchArgv) / 4
)

func (in *Instance) inScratch(p uint32) bool {
	return in.scratch != 0 && p >= in.scratch && p < in.scratch+scratchSize
}

// writeString copies s into a NUL-terminated guest buffer: the scratch
// buffer when it fits, else a fresh allocation (freeGuest handles both).
// An export that takes two strings passes the first through allocString.
func (in *Instance) writeString(s string) (ptr, n uint32, err error) {
	return in.putString(s, true)
}

// allocString is writeString without the scratch buffer.
func (in *Instance) allocString(s string) (ptr, n uint32, err error) {
	return in.putString(s, false)
}

func (in *Instance) putString(s string, scratch bool) (ptr, n uint32, err error) {
	if uint64(len(s)) >= 1<<31 {
		return 0, 0, fmt.Errorf("%w: string of %d bytes", ErrOutOfMemory, len(s))
	}
	if scratch && in.scratch != 0 && len(s)+1 <= scratchSize-scratchString {
		p := in.scratch + scratchString
		buf, ok := in.mod.Memory().Read(p, uint32(len(s))+1)
		if !ok {
			return 0, 0, ErrDead
		}
		copy(buf, s)
		buf[len(s)] = 0
		return p, uint32(len(s)), nil
	}
	p, err := in.malloc(uint32(len(s)) + 1)
	if err != nil {
		return 0, 0, err
	}
	buf, ok := in.mod.Memory().Read(p, uint32(len(s))+1)
	if !ok {
		in.freeGuest(p)
		return 0, 0, ErrDead
	}
	copy(buf, s)
	buf[len(s)] = 0
	return p, uint32(len(s)), nil
}

// readCString reads a NUL-terminated guest string of at most 64 KiB.
func (in *Instance) readCString(p uint32) (string, error) {
	if in.dead {
		return "", ErrDead
	}
	if p == 0 {
		return "", errors.New("quickjs: null string")
	}
	mem := in.mod.Memory()
	for n := uint32(0); n < 1<<16; n++ {
		b, ok := mem.ReadByte(p + n)
		if !ok {
			return "", ErrDead
		}
		if b == 0 {
			s, _ := mem.Read(p, n)
			return string(s), nil
		}
	}
	return "", errors.New("quickjs: unterminated string")
}

// throwString makes the guest throw s (as an Error-less string value) and
// returns the trampoline's "exception" result, 0.
func (in *Instance) throwString(s string) uint32 {
	v, err := in.NewString(s)
	if err != nil {
		return 0
	}
	if r, err := in.call(xThrow, uint64(v)); err == nil {
		in.Free(Value(r))
	}
	in.Free(v)
	return 0
}
