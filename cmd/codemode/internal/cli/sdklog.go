package cli

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
)

// quietSDK passes the MCP go-sdk's info records on at debug level. The
// SDK logs every session's connect, initialize and disconnect at info,
// which over HTTP is a few lines per client request; at the default
// level the log should hold the server's own records (one per run).
// The SDK's warnings and errors pass unchanged.
type quietSDK struct{ slog.Handler }

// sdkPrefix is the package path prefix of the SDK's records' callers.
const sdkPrefix = "github.com/modelcontextprotocol/go-sdk/"

func (h quietSDK) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && fromSDK(r.PC) {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietSDK) WithAttrs(as []slog.Attr) slog.Handler {
	return quietSDK{h.Handler.WithAttrs(as)}
}

func (h quietSDK) WithGroup(name string) slog.Handler {
	return quietSDK{h.Handler.WithGroup(name)}
}

// fromSDK reports whether a record was logged by the SDK: slog records
// the caller's program counter in every record.
func fromSDK(pc uintptr) bool {
	if pc == 0 {
		return false
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	return strings.HasPrefix(f.Function, sdkPrefix)
}
