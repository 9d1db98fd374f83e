// Package sandbox is the JavaScript runner: it runs one untrusted
// JavaScript program on QuickJS-NG against named binding namespaces
// (groups of async JSON functions supplied by the host) and returns its
// value, its console lines, and at most one failure of a fixed set of
// kinds. It is the runner behind internal/guest ([Sandbox] is a
// guest.Runner and a guest.Suspender); internal/guest/js is the front end
// that prepares the programs it runs.
//
// Its request and result types (Request, Result, Namespace, Failure) are
// the run protocol internal/guest's Runner is declared over, and say
// nothing of JavaScript. The rest is JavaScript's: the prelude
// (prelude.js), which is the guest half of the run loop (console, timers,
// the tools proxy, the data boundary) and whose host operations run.go
// serves; the URL shim (url.js); and the reserved words and globals a
// namespace may not be named, since a namespace becomes a global. They
// stay with the run loop because the two halves are one protocol.
//
// Every run gets a fresh engine instance with its own memory, clock and
// random seed; nothing a program does is visible to another run. The
// program has no filesystem, network, process, modules, timers outside
// its run, or code generation. The only authority it has is the bindings.
//
// The engine is QuickJS-NG compiled to WebAssembly and run by wazero in
// internal/quickjs (see [Sandbox.Language] and [Sandbox.Isolation]); no
// engine type appears in this package's API.
package sandbox
