package quickjs

import (
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// This file declares the guest ABI in one place: every export the Go side
// calls and every import it provides. [checkABI] verifies the compiled
// module against it at load, so a changed engine build fails with a named
// error instead of a nil-function panic deep inside a run.

// wasmSHA256 is the SHA-256 of the pinned quickjs.wasm (npm quickjs-wasi
// 3.7.0). The Makefile checks the copied file against it and [NewEngine]
// refuses other bytes.
const wasmSHA256 = "c0bd8f296e18cf074969f6401b9ecb72609a1323818ec2b9bf7a8f8d740d1363"

// PackageVersion is the npm quickjs-wasi version the embedded engine comes from.
const PackageVersion = "3.7.0"

// exports holds the guest functions the host calls. Field order does not
// matter; exportTable maps each to its name.
type exports struct {
	initialize          api.Function // _initialize(): WASI reactor constructor
	version             api.Function // qjs_get_quickjs_version() -> char*
	init                api.Function // qjs_init() -> int (0 on success)
	setRejectionHandler api.Function // qjs_set_promise_rejection_handler(enable)
	setMemoryLimit      api.Function // qjs_set_memory_limit(bytes)
	setMaxStackSize     api.Function // qjs_set_max_stack_size(bytes)
	eval                api.Function // qjs_eval(code, len, filename, flags) -> JSValue*
	compile             api.Function // qjs_compile(code, len, filename, evalFlags, writeFlags, size_t* outLen) -> uint8_t*
	evalBytecode        api.Function // qjs_eval_bytecode(buf, len) -> JSValue*
	newString           api.Function // qjs_new_string(ptr, len) -> JSValue*
	newNumber           api.Function // qjs_new_number(f64) -> JSValue*
	getStringLen        api.Function // qjs_get_string_len(JSValue*, size_t* len) -> char*
	freeCString         api.Function // qjs_free_cstring(char*)
	getFloat64          api.Function // qjs_get_float64(JSValue*) -> f64
	isException         api.Function // qjs_is_exception(JSValue*) -> int
	isString            api.Function // qjs_is_string(JSValue*) -> int
	isUncatchable       api.Function // qjs_is_uncatchable_error(JSValue*) -> int
	freeValue           api.Function // qjs_free_value(JSValue*)
	getGlobal           api.Function // qjs_get_global() -> JSValue*
	getPropString       api.Function // qjs_get_prop_string(JSValue*, char*) -> JSValue*
	setPropString       api.Function // qjs_set_prop_string(JSValue*, char*, JSValue*) -> int
	call                api.Function // qjs_call(fn, this, argc, JSValue**) -> JSValue*
	newHostFunction     api.Function // qjs_new_host_function(name, len, argc) -> JSValue*
	promiseState        api.Function // qjs_promise_state(JSValue*) -> int
	promiseResult       api.Function // qjs_promise_result(JSValue*) -> JSValue*
	isJobPending        api.Function // qjs_is_job_pending() -> int
	executePendingJob   api.Function // qjs_execute_pending_job() -> int (<0 exception)
	getException        api.Function // qjs_get_exception() -> JSValue*
	throw               api.Function // qjs_throw(JSValue*) -> JSValue* (JS_EXCEPTION)
	getValuePtr         api.Function // qjs_get_value_ptr(JSValue*) -> void*
	malloc              api.Function // wasm_malloc(size) -> void*
	free                api.Function // wasm_free(void*)
	getAllocatedSize    api.Function // qjs_get_allocated_size() -> size_t
	getUndefined        api.Function // qjs_get_undefined() -> JSValue*
	runGC               api.Function // qjs_run_gc()
	setGCThreshold      api.Function // qjs_set_gc_threshold(bytes)
}

var exportTable = []struct {
	name string
	fn   func(*exports) *api.Function
}{
	{"_initialize", func(e *exports) *api.Function { return &e.initialize }},
	{"qjs_get_quickjs_version", func(e *exports) *api.Function { return &e.version }},
	{"qjs_init", func(e *exports) *api.Function { return &e.init }},
	{"qjs_set_promise_rejection_handler", func(e *exports) *api.Function { return &e.setRejectionHandler }},
	{"qjs_set_memory_limit", func(e *exports) *api.Function { return &e.setMemoryLimit }},
	{"qjs_set_max_stack_size", func(e *exports) *api.Function { return &e.setMaxStackSize }},
	{"qjs_eval", func(e *exports) *api.Function { return &e.eval }},
	{"qjs_compile", func(e *exports) *api.Function { return &e.compile }},
	{"qjs_eval_bytecode", func(e *exports) *api.Function { return &e.evalBytecode }},
	{"qjs_new_string", func(e *exports) *api.Function { return &e.newString }},
	{"qjs_new_number", func(e *exports) *api.Function { return &e.newNumber }},
	{"qjs_get_string_len", func(e *exports) *api.Function { return &e.getStringLen }},
	{"qjs_free_cstring", func(e *exports) *api.Function { return &e.freeCString }},
	{"qjs_get_float64", func(e *exports) *api.Function { return &e.getFloat64 }},
	{"qjs_is_exception", func(e *exports) *api.Function { return &e.isException }},
	{"qjs_is_string", func(e *exports) *api.Function { return &e.isString }},
	{"qjs_is_uncatchable_error", func(e *exports) *api.Function { return &e.isUncatchable }},
	{"qjs_free_value", func(e *exports) *api.Function { return &e.freeValue }},
	{"qjs_get_global", func(e *exports) *api.Function { return &e.getGlobal }},
	{"qjs_get_prop_string", func(e *exports) *api.Function { return &e.getPropString }},
	{"qjs_set_prop_string", func(e *exports) *api.Function { return &e.setPropString }},
	{"qjs_call", func(e *exports) *api.Function { return &e.call }},
	{"qjs_new_host_function", func(e *exports) *api.Function { return &e.newHostFunction }},
	{"qjs_promise_state", func(e *exports) *api.Function { return &e.promiseState }},
	{"qjs_promise_result", func(e *exports) *api.Function { return &e.promiseResult }},
	{"qjs_is_job_pending", func(e *exports) *api.Function { return &e.isJobPending }},
	{"qjs_execute_pending_job", func(e *exports) *api.Function { return &e.executePendingJob }},
	{"qjs_get_exception", func(e *exports) *api.Function { return &e.getException }},
	{"qjs_throw", func(e *exports) *api.Function { return &e.throw }},
	{"qjs_get_value_ptr", func(e *exports) *api.Function { return &e.getValuePtr }},
	{"wasm_malloc", func(e *exports) *api.Function { return &e.malloc }},
	{"wasm_free", func(e *exports) *api.Function { return &e.free }},
	{"qjs_get_allocated_size", func(e *exports) *api.Function { return &e.getAllocatedSize }},
	{"qjs_get_undefined", func(e *exports) *api.Function { return &e.getUndefined }},
	{"qjs_run_gc", func(e *exports) *api.Function { return &e.runGC }},
	{"qjs_set_gc_threshold", func(e *exports) *api.Function { return &e.setGCThreshold }},
}

// importTable lists every import the host provides, by module and name.
// The host modules are built from it; checkABI verifies the guest asks for
// nothing else.
var importTable = map[string][]string{
	"env": {
		"host_call", "host_interrupt", "host_promise_rejection",
		"host_module_normalize", "host_module_load", "host_get_timezone_offset",
	},
	"wasi_snapshot_preview1": {
		"clock_time_get", "fd_close", "fd_fdstat_get", "fd_seek", "fd_write", "random_get",
	},
}

// MissingExportError reports a guest export the host needs but the engine
// binary does not provide.
type MissingExportError struct{ Name string }

func (e *MissingExportError) Error() string {
	return fmt.Sprintf("quickjs: engine binary lacks export %q", e.Name)
}

// UnexpectedImportError reports a guest import the host does not provide.
type UnexpectedImportError struct{ Module, Name string }

func (e *UnexpectedImportError) Error() string {
	return fmt.Sprintf("quickjs: engine binary imports %s.%s, which the host does not provide", e.Module, e.Name)
}

// checkABI verifies the compiled module against the declared ABI.
func checkABI(m wazero.CompiledModule) error {
	for _, def := range m.ImportedFunctions() {
		mod, name, _ := def.Import()
		if !contains(importTable[mod], name) {
			return &UnexpectedImportError{Module: mod, Name: name}
		}
	}
	exported := m.ExportedFunctions()
	for _, x := range exportTable {
		if _, ok := exported[x.name]; !ok {
			return &MissingExportError{Name: x.name}
		}
	}
	if _, ok := m.ExportedMemories()["memory"]; !ok {
		return &MissingExportError{Name: "memory"}
	}
	return nil
}

func bindExports(mod api.Module) (*exports, error) {
	e := new(exports)
	for _, x := range exportTable {
		f := mod.ExportedFunction(x.name)
		if f == nil {
			return nil, &MissingExportError{Name: x.name}
		}
		*x.fn(e) = f
	}
	return e, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
