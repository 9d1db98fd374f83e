package quickjs

import (
	"fmt"

	"github.com/tetratelabs/wazero"
)

// This file declares the guest ABI in one place: every export the Go side
// calls and every import it provides. [checkABI] verifies the compiled
// module against it at load, so a changed engine build fails with a named
// error instead of a nil-function panic deep inside a run.

// The ABI is that of the pinned build, enginebin.SHA256 (npm quickjs-wasi
// enginebin.PackageVersion); [NewEngine] refuses other bytes.

// export names a guest function the host calls; exportNames maps each to
// its name in the binary (see Instance.exports).
type export uint8

const (
	xInitialize          export = iota // _initialize(): WASI reactor constructor
	xVersion                           // qjs_get_quickjs_version() -> char*
	xInit                              // qjs_init() -> int (0 on success)
	xSetRejectionHandler               // qjs_set_promise_rejection_handler(enable)
	xSetMemoryLimit                    // qjs_set_memory_limit(bytes)
	xSetMaxStackSize                   // qjs_set_max_stack_size(bytes)
	xEval                              // qjs_eval(code, len, filename, flags) -> JSValue*
	xCompile                           // qjs_compile(code, len, filename, evalFlags, writeFlags, size_t* outLen) -> uint8_t*
	xEvalBytecode                      // qjs_eval_bytecode(buf, len) -> JSValue*
	xNewString                         // qjs_new_string(ptr, len) -> JSValue*
	xNewNumber                         // qjs_new_number(f64) -> JSValue*
	xGetStringLen                      // qjs_get_string_len(JSValue*, size_t* len) -> char*
	xFreeCString                       // qjs_free_cstring(char*)
	xGetFloat64                        // qjs_get_float64(JSValue*) -> f64
	xIsException                       // qjs_is_exception(JSValue*) -> int
	xIsString                          // qjs_is_string(JSValue*) -> int
	xIsUncatchable                     // qjs_is_uncatchable_error(JSValue*) -> int
	xFreeValue                         // qjs_free_value(JSValue*)
	xGetGlobal                         // qjs_get_global() -> JSValue*
	xGetPropString                     // qjs_get_prop_string(JSValue*, char*) -> JSValue*
	xSetPropString                     // qjs_set_prop_string(JSValue*, char*, JSValue*) -> int
	xCall                              // qjs_call(fn, this, argc, JSValue**) -> JSValue*
	xNewHostFunction                   // qjs_new_host_function(name, len, argc) -> JSValue*
	xPromiseState                      // qjs_promise_state(JSValue*) -> int
	xPromiseResult                     // qjs_promise_result(JSValue*) -> JSValue*
	xIsJobPending                      // qjs_is_job_pending() -> int
	xExecutePendingJob                 // qjs_execute_pending_job() -> int (<0 exception)
	xGetException                      // qjs_get_exception() -> JSValue*
	xThrow                             // qjs_throw(JSValue*) -> JSValue* (JS_EXCEPTION)
	xGetValuePtr                       // qjs_get_value_ptr(JSValue*) -> void*
	xMalloc                            // wasm_malloc(size) -> void*
	xFree                              // wasm_free(void*)
	xGetAllocatedSize                  // qjs_get_allocated_size() -> size_t
	xGetUndefined                      // qjs_get_undefined() -> JSValue*
	xRunGC                             // qjs_run_gc()
	xSetGCThreshold                    // qjs_set_gc_threshold(bytes)
	numExports
)

var exportNames = [numExports]string{
	xInitialize:          "_initialize",
	xVersion:             "qjs_get_quickjs_version",
	xInit:                "qjs_init",
	xSetRejectionHandler: "qjs_set_promise_rejection_handler",
	xSetMemoryLimit:      "qjs_set_memory_limit",
	xSetMaxStackSize:     "qjs_set_max_stack_size",
	xEval:                "qjs_eval",
	xCompile:             "qjs_compile",
	xEvalBytecode:        "qjs_eval_bytecode",
	xNewString:           "qjs_new_string",
	xNewNumber:           "qjs_new_number",
	xGetStringLen:        "qjs_get_string_len",
	xFreeCString:         "qjs_free_cstring",
	xGetFloat64:          "qjs_get_float64",
	xIsException:         "qjs_is_exception",
	xIsString:            "qjs_is_string",
	xIsUncatchable:       "qjs_is_uncatchable_error",
	xFreeValue:           "qjs_free_value",
	xGetGlobal:           "qjs_get_global",
	xGetPropString:       "qjs_get_prop_string",
	xSetPropString:       "qjs_set_prop_string",
	xCall:                "qjs_call",
	xNewHostFunction:     "qjs_new_host_function",
	xPromiseState:        "qjs_promise_state",
	xPromiseResult:       "qjs_promise_result",
	xIsJobPending:        "qjs_is_job_pending",
	xExecutePendingJob:   "qjs_execute_pending_job",
	xGetException:        "qjs_get_exception",
	xThrow:               "qjs_throw",
	xGetValuePtr:         "qjs_get_value_ptr",
	xMalloc:              "wasm_malloc",
	xFree:                "wasm_free",
	xGetAllocatedSize:    "qjs_get_allocated_size",
	xGetUndefined:        "qjs_get_undefined",
	xRunGC:               "qjs_run_gc",
	xSetGCThreshold:      "qjs_set_gc_threshold",
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
	for _, name := range exportNames {
		if _, ok := exported[name]; !ok {
			return &MissingExportError{Name: name}
		}
	}
	if _, ok := m.ExportedMemories()["memory"]; !ok {
		return &MissingExportError{Name: "memory"}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
