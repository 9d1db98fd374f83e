package codemode

import (
	"context"
	"encoding/json"
)

// The built-in tools, below BuiltinNamespace ($codemode).
//
// Each is a row of this table, not a branch in admission: what it checks
// of its input before the call is admitted, the function that serves a
// call, and whether it is a transaction's (judged by the tools it
// declares, taking no concurrency slot).

// builtinTool is one built-in tool.
type builtinTool struct {
	name string
	// offered reports whether a Runtime has the tool.
	offered func(rt *Runtime) bool
	// listed: the tool is a member of the tools binding, so that
	// Object.keys and signatures show it (transactions' tools are found
	// by name only).
	listed bool
	// check refuses an input before the call is admitted; nil accepts
	// any.
	check func(rt *Runtime, input json.RawMessage) error
	// serve makes the function that serves a call, once the call has its
	// audit index.
	serve func(ex *execution, index int) func(context.Context, json.RawMessage) (any, error)
	// transaction: begin, commit or rollback. Such a call takes no
	// concurrency slot, since it may wait for the transaction's own calls,
	// and begin is judged by the tools it declares.
	transaction bool
}

func always(*Runtime) bool { return true }

func withStore(rt *Runtime) bool { return rt.opts.Values != nil }

// withTypes: some tool has named types, or schemas large enough that its
// signature is cut into parts (a plain tree of small tools keeps the
// view peers have of it).
func withTypes(rt *Runtime) bool { return len(rt.types.bySet) > 0 || rt.types.plainParts }

func storeTool(name string) builtinTool {
	return builtinTool{name: name, offered: withStore, listed: true,
		serve: func(ex *execution, _ int) func(context.Context, json.RawMessage) (any, error) {
			return ex.rt.stateTool(name, ex.session)
		}}
}

func txTool(name string, check func(*Runtime, json.RawMessage) error) builtinTool {
	return builtinTool{name: name, offered: always, check: check, transaction: true,
		serve: func(ex *execution, index int) func(context.Context, json.RawMessage) (any, error) {
			return ex.txTool(name, index)
		}}
}

// builtinTools are the built-in tools, in the order the binding lists
// them.
var builtinTools = []builtinTool{
	{name: "search", offered: always, listed: true,
		check: func(_ *Runtime, in json.RawMessage) error { return validateSearch(in) },
		serve: func(ex *execution, _ int) func(context.Context, json.RawMessage) (any, error) {
			return ex.rt.searchTool
		}},
	{name: "types", offered: withTypes, listed: true,
		check: func(_ *Runtime, in json.RawMessage) error { return validateTypes(in) },
		serve: func(ex *execution, _ int) func(context.Context, json.RawMessage) (any, error) {
			return ex.rt.typesTool
		}},
	storeTool("store"), storeTool("load"), storeTool("keys"),
	txTool("begin", func(rt *Runtime, in json.RawMessage) error { _, err := rt.parseTouches(in); return err }),
	txTool("commit", nil), txTool("rollback", nil),
}

// builtin returns the built-in tool a path names, when the Runtime
// offers it.
func (rt *Runtime) builtin(path []string) *builtinTool {
	if len(path) != 2 || path[0] != BuiltinNamespace {
		return nil
	}
	for i := range builtinTools {
		if b := &builtinTools[i]; b.name == path[1] && b.offered(rt) {
			return b
		}
	}
	return nil
}

func isTxTool(path []string) bool {
	if len(path) != 2 || path[0] != BuiltinNamespace {
		return false
	}
	for _, b := range builtinTools {
		if b.name == path[1] {
			return b.transaction
		}
	}
	return false
}
