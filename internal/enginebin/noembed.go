//go:build !codemode_embed

package enginebin

// embedded is empty without the codemode_embed tag: the engine is resolved
// at run time (see Resolve).
var embedded []byte
