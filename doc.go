// Package codemode runs model-written JavaScript or TypeScript programs
// against a host's tools, inside a confined engine.
//
// A language model gets one tool, execute. It writes a short program that
// calls the host's tools — await tools.orders.lookup({ id }) — loops,
// filters and runs independent calls in parallel; only the program's final
// value goes back to the model. The program is untrusted: it has no
// filesystem, network, process, modules or code generation, only the tools
// the host hands it, each described by JSON Schema. Every run ends within
// its time and memory budget with a [Result]: a value, the console lines,
// the audit of tool calls, or a typed [Diagnostic].
//
//	rt, err := codemode.New(codemode.Options{Tools: codemode.Tools{
//		"orders": codemode.Tools{"lookup": lookup},
//	}})
//	res, err := rt.Execute(ctx, `return await tools.orders.lookup({ id: "o-1" })`)
//
// Program failures are data in the Result, never a Go error. Execute
// returns an error only when the run did not run or was interrupted:
// ErrClosed (the Runtime was closed before it began), the context's
// error (the caller cancelled it or its deadline passed), or ErrStopped
// (Close stopped it); an interrupted run's Result holds what happened
// until then.
//
// Beyond one call that waits for the end:
//   - [Runtime.ExecuteSuspendable] and [Runtime.Resume]: a run that waits
//     for tool calls becomes authenticated bytes and continues later, in
//     any process (a person's approval, a slow queue, a restart); [Steps]
//     runs each step once over a run store (package store).
//   - [Options.Policy]: allow, deny or ask about every call, inside
//     transactions too, by the tools' [Annotations] or their names
//     ([Rules]); whoever approves sees the whole input ([Call.Shown]).
//   - [Cells]: runs that go on after their caller stops waiting, on any
//     Runtime; [WithLogListener] follows any run's console as it is
//     written.
//   - [Options.Values]: values a session's programs keep from one run to
//     the next; tools.$codemode.begin and commit group calls into a
//     transaction that is undone ([Tool].Compensate) when the run fails.
package codemode
