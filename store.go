package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/codemode-go/codemode/store"
)

// State across runs.
//
// With Options.Values set (a store.Values), programs get three more
// built-in tools that keep
// JSON values for their session (WithSession; runs without one share the
// empty session) from one run to the next:
//
//	await tools.$codemode.store({ key: "cursor", value: { page: 3 } })  // value null deletes
//	const { value } = await tools.$codemode.load({ key: "cursor" })     // null when absent
//	const { keys } = await tools.$codemode.keys()

// stateTool serves one of the built-in state tools for a session.
func (rt *Runtime) stateTool(name, session string) func(context.Context, json.RawMessage) (any, error) {
	st := rt.opts.Values
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var in struct {
			Key   *string         `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		var keyText struct {
			Key json.RawMessage `json:"key"`
		}
		_ = json.Unmarshal(raw, &in)
		_ = json.Unmarshal(raw, &keyText)
		if name != "keys" {
			switch {
			case in.Key == nil:
				return nil, ToolError("pass { key } (a string)")
			case store.CheckKey(*in.Key) != nil:
				return nil, ToolError(fmt.Sprintf("a key is a string of 1 to %d bytes, without NUL", store.MaxKeyBytes))
			case loneSurrogate(keyText.Key):
				// Decoding turns every lone surrogate into U+FFFD, so
				// "\ud800" and "\udbff" would be one key.
				return nil, ToolError("a key may not hold a lone surrogate (half of a UTF-16 pair)")
			}
		}
		var err error
		switch name {
		case "load":
			v, ok, lerr := st.Get(ctx, session, *in.Key)
			if lerr != nil {
				return nil, lerr
			}
			if !ok {
				v = json.RawMessage("null")
			}
			return map[string]json.RawMessage{"value": v}, nil
		case "keys":
			keys, kerr := st.Keys(ctx, session)
			if kerr != nil {
				return nil, kerr
			}
			return map[string][]string{"keys": keys}, nil
		case "store":
			v := in.Value
			if len(v) == 0 || string(v) == "null" {
				v = nil
			} else if len(v) > store.MaxValueBytes {
				return nil, ToolError(fmt.Sprintf("the value is %d bytes of JSON; a stored value may have %d", len(v), store.MaxValueBytes))
			}
			err = st.Put(ctx, session, *in.Key, v)
			if errors.Is(err, store.ErrFull) || errors.Is(err, store.ErrTooLarge) || errors.Is(err, store.ErrBadKey) {
				return nil, ToolError(strings.TrimPrefix(err.Error(), "store: "))
			}
		}
		if err != nil {
			return nil, err
		}
		return map[string]bool{"ok": true}, nil
	}
}

// loneSurrogate reports whether a JSON string's text escapes a UTF-16
// surrogate that is not half of a pair.
func loneSurrogate(s json.RawMessage) bool {
	for i := 0; i+5 < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if s[i+1] != 'u' {
			i++ // an escaped character, maybe a backslash
			continue
		}
		u, ok := hex4(s[i+2 : i+6])
		switch {
		case !ok:
		case u >= 0xDC00 && u <= 0xDFFF:
			return true // a low half with no high half before it
		case u >= 0xD800 && u <= 0xDBFF:
			if i+11 >= len(s) || s[i+6] != '\\' || s[i+7] != 'u' {
				return true
			}
			if lo, ok := hex4(s[i+8 : i+12]); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6 // the pair's low half
		}
		i += 5
	}
	return false
}

func hex4(b json.RawMessage) (rune, bool) {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
