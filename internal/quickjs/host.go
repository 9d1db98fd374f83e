package quickjs

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// The host side of the guest ABI. wazero instantiates these once per
// runtime; each call finds its Instance in the context the export was
// called with (see Instance.ctx).

type instanceKey struct{}

func instanceFrom(ctx context.Context) *Instance {
	in, _ := ctx.Value(instanceKey{}).(*Instance)
	return in
}

func returnZero(_ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 }

// hostCall dispatches a guest call of a function made by NewHostFunction.
// Arguments are borrowed boxes owned by the engine's trampoline; the
// result is a fresh box the trampoline takes, or 0 after a throw.
func hostCall(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	namePtr, nameLen := uint32(stack[0]), uint32(stack[1])
	argc, argvPtr := uint32(stack[3]), uint32(stack[4])
	if in == nil || in.host == nil {
		stack[0] = 0
		return
	}
	// A program that calls the host in a loop reaches the host far more
	// often than a fuel tick: stop it here too.
	in.stopIfDone()
	name, ok := mod.Memory().Read(namePtr, nameLen)
	if !ok {
		stack[0] = 0
		return
	}
	if string(name) != in.hostName { // compared without copying
		in.hostName = string(name)
	}
	if in.hostDepth == len(in.hostArgs) {
		in.hostArgs = append(in.hostArgs, nil)
	}
	args := in.hostArgs[in.hostDepth][:0]
	for i := range argc {
		p, ok := mod.Memory().ReadUint32Le(argvPtr + i*4)
		if !ok {
			stack[0] = 0
			return
		}
		args = append(args, Value(p))
	}
	in.hostArgs[in.hostDepth] = args
	in.hostDepth++
	defer func() { in.hostDepth-- }()
	v, err := in.host(in, in.hostName, args)
	if err != nil {
		stack[0] = uint64(in.throwString(err.Error()))
		return
	}
	stack[0] = uint64(v)
}

// hostInterrupt answers QuickJS's own interrupt poll. Stopping is the
// fuel tick's job, so it never asks the engine to interrupt.
func hostInterrupt(_ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 }

// hostTimezoneOffset answers the engine's time-zone queries (always UTC)
// and serves the loop-fuel tick (see instrument.go).
func hostTimezoneOffset(ctx context.Context, _ api.Module, stack []uint64) {
	hi, lo := int32(stack[0]), uint32(stack[1])
	stack[0] = 0
	if hi == tickHi && lo == tickLo {
		if in := instanceFrom(ctx); in != nil {
			in.tick()
		}
	}
}

// hostPromiseRejection records the engine's rejection-tracker events. The
// engine hands over two boxes it duplicated for us; they are freed when
// the instance resolves them (see Instance.UnhandledRejections).
func hostPromiseRejection(ctx context.Context, _ api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		return
	}
	in.rejections = append(in.rejections, rejection{
		promise: Value(stack[0]), reason: Value(stack[1]), handled: uint32(stack[2]) != 0,
	})
}

const (
	wasiErrnoSuccess = 0
	wasiErrnoBadf    = 8
	wasiErrnoInval   = 28
)

// wasiClockTimeGet serves Date.now (realtime) and performance.now
// (monotonic) from the instance's own clock.
func wasiClockTimeGet(ctx context.Context, mod api.Module, stack []uint64) {
	id, resultPtr := uint32(stack[0]), uint32(stack[2])
	in := instanceFrom(ctx)
	var ns int64
	switch id {
	case 0: // realtime
		ns = time.Now().UnixNano()
		if in != nil && in.cfg.Frozen {
			ns = seedSentinel * 1000 // see InstanceConfig.Frozen and findRandomState
		} else if in != nil && in.seedJitter != 0 {
			// While the context is created, QuickJS seeds Math.random from
			// the realtime clock in microseconds. Moving the reading inside
			// the current millisecond gives every instance its own seed
			// without changing any time the program can see.
			ns = ns - ns%int64(time.Millisecond) + in.seedJitter%int64(time.Millisecond)
		}
	case 1, 2, 3: // monotonic, process and thread CPU time
		if in != nil && in.cfg.Frozen {
			ns = 0
		} else if in != nil {
			ns = int64(time.Since(in.born))
			if !in.originRead {
				in.origin, in.originRead = ns, true
			}
		}
	default:
		stack[0] = wasiErrnoInval
		return
	}
	if !mod.Memory().WriteUint64Le(resultPtr, uint64(ns)) {
		stack[0] = wasiErrnoInval
		return
	}
	stack[0] = wasiErrnoSuccess
}

func wasiBadFD1(_ context.Context, _ api.Module, stack []uint64) { stack[0] = wasiErrnoBadf }
func wasiBadFD2(_ context.Context, _ api.Module, stack []uint64) { stack[0] = wasiErrnoBadf }
func wasiBadFD4(_ context.Context, _ api.Module, stack []uint64) { stack[0] = wasiErrnoBadf }

// wasiFdWrite accepts the engine's own diagnostics on stdout/stderr into a
// small bounded buffer (for debugging the engine, never shown to programs).
func wasiFdWrite(ctx context.Context, mod api.Module, stack []uint64) {
	fd, iovs, n, nwrittenPtr := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	if fd != 1 && fd != 2 {
		stack[0] = wasiErrnoBadf
		return
	}
	in := instanceFrom(ctx)
	mem := mod.Memory()
	var total uint32
	for i := uint32(0); i < n; i++ {
		iov, ok := mem.Read(iovs+i*8, 8)
		if !ok {
			stack[0] = wasiErrnoInval
			return
		}
		p, l := binary.LittleEndian.Uint32(iov), binary.LittleEndian.Uint32(iov[4:])
		b, ok := mem.Read(p, l)
		if !ok {
			stack[0] = wasiErrnoInval
			return
		}
		if in != nil && len(in.stderr) < maxEngineOutput {
			room := maxEngineOutput - len(in.stderr)
			if len(b) > room {
				b = b[:room]
			}
			in.stderr = append(in.stderr, b...)
		}
		total += l
	}
	if !mem.WriteUint32Le(nwrittenPtr, total) {
		stack[0] = wasiErrnoInval
		return
	}
	stack[0] = wasiErrnoSuccess
}

const maxEngineOutput = 4096

func wasiRandomGet(ctx context.Context, mod api.Module, stack []uint64) {
	p, l := uint32(stack[0]), uint32(stack[1])
	b, ok := mod.Memory().Read(p, l)
	if !ok {
		stack[0] = wasiErrnoInval
		return
	}
	if in := instanceFrom(ctx); in != nil {
		in.rng.Read(b)
	}
	stack[0] = wasiErrnoSuccess
}
