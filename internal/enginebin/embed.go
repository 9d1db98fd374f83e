//go:build codemode_embed

package enginebin

import _ "embed"

// embedded is the engine built into this binary. Only builds with the
// codemode_embed tag have it (the Makefile's, after `make wasm` copied the
// verified file here); a module download lacks quickjs.wasm, so the
// untagged build must not name it.
//
//go:embed quickjs.wasm
var embedded []byte
