package enginebin

import _ "embed"

// embedded is the pinned engine, committed beside this file (see
// PROVENANCE) and so part of every module download: every build carries
// it, and nothing has to be fetched or installed at run time.
//
//go:embed quickjs.wasm
var embedded []byte
