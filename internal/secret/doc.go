// Package secret keeps codemode's per-user secret keys: random bytes in
// files under the per-user configuration directory, made on first use and
// refused when anyone but their owner could have read or replaced them.
//
// A key signs what codemode later trusts from disk (compiled engine code
// in a cache directory other users or a restored cache could have
// written), so a key file others can read or write is no key at all: [Key]
// returns an error wrapping [ErrUnsafe] that names the file and the fix,
// rather than use it.
package secret
