package quickjs

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// wasmModule assembles a module from raw section bodies, in order.
func wasmModule(sections ...[]byte) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		out = append(out, s[0])
		out = append(out, uleb(uint64(len(s)-1))...)
		out = append(out, s[1:]...)
	}
	return out
}

func section(id byte, body ...byte) []byte { return append([]byte{id}, body...) }

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

// loopModule exports run(): a loop of n iterations, returning n. It
// imports the tick function the way the engine does.
func loopModule(n int64, extra ...byte) []byte {
	body := []byte{
		0x01, 0x01, 0x7f, // one i32 local
		0x03, 0x40, // loop
		0x20, 0x00, 0x41, 0x01, 0x6a, 0x22, 0x00, // local.get 0; i32.const 1; i32.add; local.tee 0
		0x41}
	body = append(body, sleb(n)...)
	body = append(body, 0x48, 0x0d, 0x00, 0x0b) // i32.lt_s; br_if 0; end
	body = append(body, extra...)
	body = append(body, 0x20, 0x00, 0x0b) // local.get 0; end
	code := append(uleb(1), append(uleb(uint64(len(body))), body...)...)
	imp := append(append(uleb(1), name("env")...), name("host_get_timezone_offset")...)
	imp = append(imp, 0x00, 0x00)
	return wasmModule(
		section(1, 0x02, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, 0x60, 0x00, 0x01, 0x7f), // types: (i32,i32)->i32, ()->i32
		section(2, imp...),
		section(3, 0x01, 0x01),
		section(6, 0x01, 0x7f, 0x01, 0x41, 0x00, 0x0b), // one mutable i32 global
		section(7, append(append(uleb(1), name("run")...), 0x00, 0x01)...),
		section(10, code...),
	)
}

func TestInstrumentTicks(t *testing.T) {
	ctx := context.Background()
	const n = 200000
	mod, globals, err := instrument(loopModule(n))
	if err != nil {
		t.Fatal(err)
	}
	// The module's one mutable global and the fuel global are exported.
	if got := strings.Join(globals, ","); got != "codemode_global_0,codemode_global_1" {
		t.Errorf("exported globals: %s", got)
	}
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	ticks := 0
	_, err = rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
			if int32(stack[0]) == tickHi && uint32(stack[1]) == tickLo {
				ticks++
			}
			stack[0] = 0
		}), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).
		Export("host_get_timezone_offset").Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Instantiate(ctx, mod)
	if err != nil {
		t.Fatalf("instrumented module does not instantiate: %v", err)
	}
	res, err := m.ExportedFunction("run").Call(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res[0] != n {
		t.Errorf("run() = %d, want %d", res[0], n)
	}
	if want := n / fuelPerTick; ticks != want {
		t.Errorf("%d ticks, want %d", ticks, want)
	}
}

func TestInstrumentRefusesUnknownOpcodes(t *testing.T) {
	// A SIMD instruction (0xfd prefix) is outside the supported set: the
	// rewrite must fail rather than misread the code.
	simd := []byte{0xfd, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a}
	_, _, err := instrument(loopModule(10, simd...))
	if !errors.Is(err, errMalformed) {
		t.Fatalf("got %v, want errMalformed", err)
	}
	if _, _, err := instrument([]byte("not wasm")); !errors.Is(err, errMalformed) {
		t.Errorf("garbage: got %v", err)
	}
	if _, _, err := instrument(loopModule(10)[:40]); !errors.Is(err, errMalformed) {
		t.Errorf("truncated: got %v", err)
	}
}

func TestInstrumentEngineDeterministic(t *testing.T) {
	wasmBytes := testWasm(t)
	a, _, err := instrument(wasmBytes)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := instrument(wasmBytes)
	if !bytes.Equal(a, b) {
		t.Error("instrumenting the engine twice gave different bytes")
	}
	if len(a) <= len(wasmBytes) {
		t.Error("instrumented engine is not larger")
	}
}

func TestCheckABI(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	empty, err := rt.CompileModule(ctx, wasmModule())
	if err != nil {
		t.Fatal(err)
	}
	var missing *MissingExportError
	if err := checkABI(empty); !errors.As(err, &missing) || missing.Name != "_initialize" {
		t.Errorf("empty module: got %v, want MissingExportError{_initialize}", err)
	}
	imp := append(append(uleb(1), name("env")...), name("open_socket")...)
	imp = append(imp, 0x00, 0x00)
	importer, err := rt.CompileModule(ctx, wasmModule(section(1, 0x01, 0x60, 0x00, 0x00), section(2, imp...)))
	if err != nil {
		t.Fatal(err)
	}
	engine, err := rt.CompileModule(ctx, testWasm(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkABI(engine); err != nil {
		t.Errorf("the pinned engine fails the ABI check: %v", err)
	}
	var unexpected *UnexpectedImportError
	if err := checkABI(importer); !errors.As(err, &unexpected) || unexpected.Name != "open_socket" {
		t.Errorf("importing module: got %v, want UnexpectedImportError{env.open_socket}", err)
	}
}
