// Package guest is the seam between codemode's contract (the root
// package) and the language programs are written in. The root package
// knows tools, schemas, limits and diagnostics; what depends on the guest
// language is behind this package's interfaces:
//
//   - [Language], the front end: the structural pre-check of a program,
//     the program made ready as written and the transform tried when the
//     runner cannot compile it, positions mapped back to the program's own
//     lines, front-end errors as a position, a message and a kind, a
//     tool's signature and call site, and the phrasing of the
//     instructions ([Guide]);
//   - [Runner], which runs a prepared program against the host's binding
//     namespaces, and [Suspender], the optional interface of a runner that
//     can suspend a run and resume it later. The root checks for
//     Suspender, as io.Copy checks for io.WriterTo, rather than assume it.
//
// The JavaScript implementation is internal/guest/js (the front end, over
// internal/typescript and internal/tsgen) with internal/sandbox as its
// runner (QuickJS-NG on internal/quickjs). The run protocol's types —
// Request, Result, Namespace — are still sandbox's, shaped by its one
// runner; a second runner is the time to move them here.
package guest
