package quickjs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Loop fuel.
//
// Guest code is native code wazero compiled; Go can neither preempt it nor
// stop it from outside. QuickJS polls its interrupt handler only between
// bytecode operations, so a single builtin call (JSON.stringify of a
// deeply nested value is quadratic, a sort of a million strings takes
// seconds) runs to its end — and while it runs, a garbage collection
// anywhere in the process waits for it, freezing every goroutine.
//
// instrument rewrites the module once, before compiling it: every loop
// header decrements a new mutable global, and when it reaches zero calls
// back into Go (tickImport) and refills it. Every long computation in the
// guest is a loop, so Go regains control at least every fuelPerTick
// iterations: the tick kills the instance when its deadline has passed or
// it was killed, and returning to Go lets the runtime preempt the
// goroutine. The cost is a global load, a subtract, a store and a branch
// per iteration. RATIONALE.md ("Why instrument loops?") has the
// measurements against wazero's close-on-context-done checks.
//
// The tick reuses an existing import, env.host_get_timezone_offset, called
// with a marker argument pair, so no function index changes: the rewrite
// only appends a global and inserts instructions.

// fuelPerTick is how many loop iterations run between calls into Go.
const fuelPerTick = 1 << 14

// tickImport is the import the injected code calls, with tickHi/tickLo
// as its arguments. The engine's own calls pass a time in seconds; the
// marker would be a date in 1895, and even then the answer (UTC, offset
// zero) is the same.
const (
	tickModule = "env"
	tickName   = "host_get_timezone_offset"
	tickHi     = -1
	tickLo     = 0x7469636b // "tick"
)

var errMalformed = errors.New("quickjs: malformed wasm module")

// instrument returns a copy of the module with loop fuel added, and the
// names of the exports it added for every mutable global (see image.go).
func instrument(mod []byte) ([]byte, []string, error) {
	if len(mod) < 8 || !bytes.Equal(mod[:4], []byte("\x00asm")) {
		return nil, nil, errMalformed
	}
	var secs []wasmSection
	r := &reader{b: mod, p: 8}
	for r.p < len(r.b) {
		id := r.byte()
		n := r.u32()
		body := r.bytes(int(n))
		if r.err != nil {
			return nil, nil, r.err
		}
		secs = append(secs, wasmSection{id, body})
	}
	var imports []byte
	if i := sectionIndex(secs, 2); i >= 0 {
		imports = secs[i].body
	}
	tickFunc, importedGlobals, err := scanImports(imports)
	if err != nil {
		return nil, nil, err
	}
	// Append the fuel global: (mut i32) (i32.const fuelPerTick).
	gi := sectionIndex(secs, 6)
	if gi < 0 {
		return nil, nil, fmt.Errorf("%w: no global section", errMalformed)
	}
	count, defined, err := vector(secs[gi].body)
	if err != nil {
		return nil, nil, err
	}
	fuelGlobal := importedGlobals + count
	fuel := append([]byte{0x7f, 0x01, 0x41}, sleb(fuelPerTick)...)
	secs[gi].body = appendToVector(count, defined, 1, append(fuel, 0x0b))

	// Export every mutable global the module defines, the fuel global
	// included, so an instance's complete state is reachable from Go: an
	// Image restores them (see image.go).
	mutable, err := mutableGlobals(defined, count)
	if err != nil {
		return nil, nil, err
	}
	mutable = append(mutable, count)
	ei := sectionIndex(secs, 7)
	if ei < 0 {
		return nil, nil, fmt.Errorf("%w: no export section", errMalformed)
	}
	exports, entries, err := vector(secs[ei].body)
	if err != nil {
		return nil, nil, err
	}
	var added bytes.Buffer
	names := make([]string, len(mutable))
	for i, g := range mutable {
		names[i] = globalExport(importedGlobals + g)
		added.Write(uleb(uint64(len(names[i]))))
		added.WriteString(names[i])
		added.WriteByte(0x03)
		added.Write(uleb(uint64(importedGlobals + g)))
	}
	secs[ei].body = appendToVector(exports, entries, uint32(len(mutable)), added.Bytes())

	inject := injection(fuelGlobal, tickFunc)
	for i, s := range secs {
		if s.id != 10 {
			continue
		}
		body, err := instrumentCode(s.body, inject)
		if err != nil {
			return nil, nil, err
		}
		secs[i].body = body
	}
	var out bytes.Buffer
	out.Write(mod[:8])
	for _, s := range secs {
		out.WriteByte(s.id)
		out.Write(uleb(uint64(len(s.body))))
		out.Write(s.body)
	}
	return out.Bytes(), names, nil
}

type wasmSection struct {
	id   byte
	body []byte
}

// sectionIndex returns the index of the last section with the id, or -1.
func sectionIndex(secs []wasmSection, id byte) int {
	at := -1
	for i, s := range secs {
		if s.id == id {
			at = i
		}
	}
	return at
}

// vector splits a section body that is a vector into its count and its
// entries.
func vector(body []byte) (uint32, []byte, error) {
	r := &reader{b: body}
	n := r.u32()
	if r.err != nil {
		return 0, nil, r.err
	}
	return n, r.b[r.p:], nil
}

// appendToVector returns a vector body of n entries followed by more, m
// entries already encoded.
func appendToVector(n uint32, entries []byte, m uint32, more []byte) []byte {
	out := uleb(uint64(n) + uint64(m))
	out = append(out, entries...)
	return append(out, more...)
}

// globalExportPrefix names the exports instrument adds for mutable
// globals: the prefix and the global's index.
const globalExportPrefix = "codemode_global_"

func globalExport(index uint32) string { return fmt.Sprintf("%s%d", globalExportPrefix, index) }

// mutableGlobals returns the module-relative indexes of the mutable
// globals among the n entries of a global section's body.
func mutableGlobals(body []byte, n uint32) ([]uint32, error) {
	r := &reader{b: body}
	var out []uint32
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.byte() // value type
		if r.byte() == 0x01 {
			out = append(out, i)
		}
		// A constant expression: one instruction, then end.
		for op := r.byte(); op != 0x0b && r.err == nil; op = r.byte() {
			if err := skipImmediates(r, op); err != nil {
				return nil, err
			}
		}
	}
	return out, r.err
}

// scanImports finds the function index of the tick import and counts
// imported globals (which come before the module's own in the index space).
func scanImports(body []byte) (tickFunc, globals uint32, err error) {
	r := &reader{b: body}
	n := r.u32()
	var funcs uint32
	found := false
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod := string(r.bytes(int(r.u32())))
		name := string(r.bytes(int(r.u32())))
		switch kind := r.byte(); kind {
		case 0x00: // function
			r.u32()
			if mod == tickModule && name == tickName {
				tickFunc, found = funcs, true
			}
			funcs++
		case 0x01: // table
			r.byte()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global
			r.byte()
			r.byte()
			globals++
		default:
			return 0, 0, fmt.Errorf("%w: import kind %d", errMalformed, kind)
		}
	}
	if r.err != nil {
		return 0, 0, r.err
	}
	if !found {
		return 0, 0, &MissingExportError{Name: tickModule + "." + tickName + " (import)"}
	}
	return tickFunc, globals, nil
}

// injection is the code placed at the top of every loop body.
func injection(global, fn uint32) []byte {
	var b bytes.Buffer
	gidx, fidx := uleb(uint64(global)), uleb(uint64(fn))
	w := func(op byte, imm []byte) { b.WriteByte(op); b.Write(imm) }
	w(0x23, gidx)              // global.get $fuel
	w(0x41, sleb(1))           // i32.const 1
	w(0x6b, nil)               // i32.sub
	w(0x24, gidx)              // global.set $fuel
	w(0x23, gidx)              // global.get $fuel
	w(0x45, nil)               // i32.eqz
	w(0x04, []byte{0x40})      // if
	w(0x41, sleb(tickHi))      //   i32.const tickHi
	w(0x41, sleb(tickLo))      //   i32.const tickLo
	w(0x10, fidx)              //   call $tick
	w(0x1a, nil)               //   drop
	w(0x41, sleb(fuelPerTick)) //  i32.const fuelPerTick
	w(0x24, gidx)              //   global.set $fuel
	w(0x0b, nil)               // end
	return b.Bytes()
}

func instrumentCode(section []byte, inject []byte) ([]byte, error) {
	r := &reader{b: section}
	n := r.u32()
	var out bytes.Buffer
	out.Write(uleb(uint64(n)))
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			break
		}
		nb, err := instrumentBody(body, inject)
		if err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		out.Write(uleb(uint64(len(nb))))
		out.Write(nb)
	}
	if r.err != nil {
		return nil, r.err
	}
	return out.Bytes(), nil
}

func instrumentBody(body []byte, inject []byte) ([]byte, error) {
	r := &reader{b: body}
	groups := r.u32()
	for i := uint32(0); i < groups; i++ {
		r.u32()
		r.byte()
	}
	if r.err != nil {
		return nil, r.err
	}
	var out bytes.Buffer
	out.Grow(len(body) + len(body)/8)
	out.Write(body[:r.p])
	for r.p < len(r.b) {
		start := r.p
		op := r.byte()
		if err := skipImmediates(r, op); err != nil {
			return nil, err
		}
		if r.err != nil {
			return nil, r.err
		}
		out.Write(r.b[start:r.p])
		if op == 0x03 { // loop
			out.Write(inject)
		}
	}
	return out.Bytes(), nil
}

// skipImmediates advances past an instruction's immediates. It covers the
// instruction set the engine build enables (MVP, sign-ext,
// nontrapping-fptoint, bulk memory, reference types, multivalue); anything
// else is an error, so a new engine build cannot be instrumented wrongly.
func skipImmediates(r *reader, op byte) error {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
		r.blockType()
	case op == 0x0c || op == 0x0d: // br, br_if
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x10: // call
		r.u32()
	case op == 0x11: // call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		n := r.u32()
		r.bytes(int(n))
	case op >= 0x20 && op <= 0x26: // locals, globals, table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
		r.u32()
		r.u32()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		r.u32()
	case op == 0x41:
		r.s64()
	case op == 0x42:
		r.s64()
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null
		r.byte()
	case op == 0xd2: // ref.func
		r.u32()
	case op == 0xfc:
		switch sub := r.u32(); {
		case sub <= 7: // trunc_sat
		case sub == 8: // memory.init
			r.u32()
			r.u32()
		case sub == 9 || sub == 13 || sub == 15 || sub == 16 || sub == 17:
			r.u32()
		case sub == 10 || sub == 12 || sub == 14: // memory.copy, table.init, table.copy
			r.u32()
			r.u32()
		case sub == 11: // memory.fill
			r.u32()
		default:
			return fmt.Errorf("%w: unknown 0xfc opcode %d", errMalformed, sub)
		}
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b || op == 0xd1:
	case op >= 0x45 && op <= 0xc4: // numeric instructions without immediates
	default:
		return fmt.Errorf("%w: unsupported opcode 0x%02x", errMalformed, op)
	}
	return nil
}

// reader decodes the wasm binary format; the first error sticks.
type reader struct {
	b   []byte
	p   int
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated at byte %d", errMalformed, r.p)
	}
	r.p = len(r.b)
}

func (r *reader) byte() byte {
	if r.p >= len(r.b) {
		r.fail()
		return 0
	}
	c := r.b[r.p]
	r.p++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || r.p+n > len(r.b) {
		r.fail()
		return nil
	}
	b := r.b[r.p : r.p+n]
	r.p += n
	return b
}

func (r *reader) u32() uint32 {
	v, n := binary.Uvarint(r.b[min(r.p, len(r.b)):])
	if n <= 0 || v > 1<<32-1 {
		r.fail()
		return 0
	}
	r.p += n
	return uint32(v)
}

// s64 skips a signed LEB128 of up to 64 bits.
func (r *reader) s64() {
	for i := 0; i < 10; i++ {
		if r.byte()&0x80 == 0 {
			return
		}
	}
	r.fail()
}

func (r *reader) limits() {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// blockType skips a block type: 0x40, a value type, or an s33 type index.
func (r *reader) blockType() {
	// A one-byte negative s33 (0x40..0x7f) is the empty type or a value
	// type; anything else is a type index.
	c := r.byte()
	if c&0x80 == 0 && c&0x40 != 0 {
		return
	}
	r.p--
	r.s64()
}

func uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func sleb(v int64) []byte {
	var out []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}
