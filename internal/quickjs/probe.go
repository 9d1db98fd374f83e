package quickjs

import (
	"encoding/binary"
	"errors"
)

// errNoCounter means the interrupt countdown could not be located, so
// Interrupt falls back to the engine's own polling interval.
var errNoCounter = errors.New("quickjs: interrupt countdown not found in JSContext")

// probeCounter finds the offset of JSContext.interrupt_counter, the
// countdown QuickJS decrements at every poll site and resets to 10,000
// when it calls the interrupt handler. It runs a short loop and looks for
// the int32 that went down by about the loop's length, then confirms the
// candidate: setting it to 1 must make the next poll call the handler.
// The struct layout is fixed for the pinned engine binary, so this runs
// once per Engine.
func (in *Instance) probeCounter() (uint32, error) {
	const span = 4096
	// The countdown starts at zero, so the first poll resets it; warm up.
	if err := in.evalDiscard("for (let i = 0; i < 3; i++) {}"); err != nil {
		return 0, err
	}
	before, ok := in.ctxBytes(span)
	if !ok {
		return 0, ErrDead
	}
	if err := in.evalDiscard("for (let i = 0; i < 300; i++) {}"); err != nil {
		return 0, err
	}
	after, ok := in.ctxBytes(span)
	if !ok {
		return 0, ErrDead
	}
	for off := uint32(4); off+4 <= span; off += 4 {
		b := int32(binary.LittleEndian.Uint32(before[off:]))
		a := int32(binary.LittleEndian.Uint32(after[off:]))
		if b > 10000 || a <= 0 || b-a < 300 || b-a > 5000 {
			continue
		}
		if in.confirmCounter(off) {
			return off, nil
		}
	}
	return 0, errNoCounter
}

func (in *Instance) confirmCounter(off uint32) bool {
	mem := in.mod.Memory()
	if !mem.WriteUint32Le(in.ctxPtr+off, 1) {
		return false
	}
	p0 := in.polls.Load()
	if in.evalDiscard("for (let i = 0; i < 10; i++) {}") != nil {
		return false
	}
	if in.polls.Load() != p0+1 {
		return false
	}
	// The handler reset the countdown; a short loop must not reach it.
	if in.evalDiscard("for (let i = 0; i < 10; i++) {}") != nil {
		return false
	}
	return in.polls.Load() == p0+1
}

func (in *Instance) evalDiscard(code string) error {
	v, err := in.Eval(code, "<probe>", 0)
	if err != nil {
		var exc *Exception
		if errors.As(err, &exc) {
			in.Free(exc.Value)
		}
		return err
	}
	in.Free(v)
	return nil
}
