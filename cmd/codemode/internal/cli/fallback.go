package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/codemode-go/codemode/mcp"
)

// engineDown reports whether the engine itself cannot start with opts'
// engine settings: a runtime without tools cannot be made either, for a
// reason other than bad options. It tells a server that failed for want
// of an engine from one that failed for its tools or options, which
// --fallback direct must not paper over.
func engineDown(opts codemode.Options) bool {
	rt, err := codemode.New(codemode.Options{CacheDir: opts.CacheDir, EngineWasm: opts.EngineWasm})
	if err == nil {
		_ = rt.Close()
		return false
	}
	return !errors.Is(err, codemode.ErrInvalidOptions)
}

// serveDirect is codemode mcp under --fallback direct once the engine
// failed to start (cause): each tool of src is served as an MCP tool of
// its own, without code mode, until the client or a signal ends it. A
// tool --policy does not plainly allow is not served (see
// mcp.DirectOptions.Policy). It closes src.
func serveDirect(ctx context.Context, f *mcpFlags, cause error, src *toolSource, token string, loopback bool,
	logger *slog.Logger, stdin io.Reader, stdout, stderr io.Writer) int {
	logger.Warn("the engine cannot start: serving each tool directly as an MCP tool of its own, without code mode (--fallback direct)", "error", cause)
	var policy func(context.Context, codemode.Call) codemode.Decision
	if f.runtime.rules != nil {
		policy = f.runtime.rules.Policy()
	}
	d := mcp.NewDirectServer(mcp.DirectOptions{
		Version:            version(),
		Logger:             logger,
		Upstreams:          src.up,
		Tools:              src.fixed,
		Policy:             policy,
		MaxSessions:        noneIfZero(f.httpMaxSessions),
		SessionIdleTimeout: noneIfZero(time.Duration(f.httpIdleTimeout)),
	})
	// Servers that arrive late, or change their tools, change the list.
	var follow sync.WaitGroup
	if ch := src.changed(); ch != nil {
		follow.Add(1)
		go func() {
			defer follow.Done()
			for range ch {
				d.Update()
			}
		}()
	}
	var code int
	if f.httpAddr != "" {
		code = serveHTTP(ctx, httpConfig{addr: f.httpAddr, token: token, loopback: loopback}, d, logger, stderr)
	} else {
		code = serveStdio(ctx, d, stdin, stdout, logger)
	}
	src.close() // closes the change channel, which ends the follower
	follow.Wait()
	return code
}
