package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/codemode-go/codemode/mcp"
)

const loginHelp = `Usage: codemode login NAME --config FILE

Authorizes codemode to the --config server NAME, a remote (URL) server
that asks for OAuth, and stores the token for codemode mcp and the other
commands: they start with the browser nowhere in sight (an MCP client
app starts codemode mcp), so the authorization is done here, once, by a
person. It opens the authorization page in the browser ($BROWSER when
set, else xdg-open or open) and prints its URL; the browser comes back
to a listener on 127.0.0.1 with the answer. Run it again when the server
asks for more access or the token can no longer be refreshed: codemode
mcp says so, naming this command, and picks up the new token without a
restart.

The server entry may say which client to use, for servers without
dynamic client registration:
  "oauth": {"clientId": "...", "clientSecret": "${SECRET}", "scopes": ["..."]}

Tokens are kept in the per-user configuration directory,
` + "`os.UserConfigDir()`" + `/codemode/tokens (or $CODEMODE_CONFIG_DIR/tokens),
one file per server and URL, readable by you alone.
`

// browserEnv names the browser command, as xdg-open and Python's
// webbrowser read it: the URL is its last argument, or replaces %s.
const browserEnv = "BROWSER"

func loginCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("login", loginHelp, stderr)
	config := fs.String("config", "", "MCP servers `file`, as for codemode mcp")
	wait := duration(5 * time.Minute)
	fs.Var(&wait, "wait", "how long to wait for the answer in the browser, a `duration`")
	noBrowser := fs.Bool("no-browser", false, "do not open a browser: only print the URL to open")
	logLevel := fs.String("log-level", "warn", "least severe log `level` written to standard error: debug, info, warn or error")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(rest) != 1 {
		return usageFailed(stderr, "codemode login", "want exactly one server NAME, got %d", len(rest))
	}
	if *config == "" {
		return usageFailed(stderr, "codemode login", "--config FILE is required: the file that names the server")
	}
	if wait <= 0 {
		return usageFailed(stderr, "codemode login", "--wait must be positive")
	}
	sf := sourceFlags{logLevel: *logLevel}
	logger, err := sf.logger(stderr, false)
	if err != nil {
		return usageFailed(stderr, "codemode login", "%v", err)
	}
	cfg, err := mcp.LoadConfig(*config)
	if err != nil {
		fmt.Fprintf(stderr, "codemode login: %v\n", err)
		return exitUsage
	}
	name := rest[0]
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(stderr, "Authorizing codemode to %q...\n", name)
	res, err := mcp.Login(ctx, cfg, name, mcp.LoginOptions{
		Open:    func(ctx context.Context, url string) error { return openBrowser(ctx, url, *noBrowser, stderr, logger) },
		Wait:    time.Duration(wait),
		Version: version(),
		Logger:  logger,
	})
	if res != nil && res.Authorized {
		fmt.Fprintf(stdout, "codemode is authorized to %q (scopes: %s); the token is stored in %s%s.\n",
			name, orNone(res.Scopes), res.TokenFile, refreshNote(res.Refreshable))
	}
	if err != nil {
		fmt.Fprintf(stderr, "codemode login: %v\n", err)
		return exitFailure
	}
	if !res.Authorized {
		fmt.Fprintf(stdout, "%q did not ask for authorization: nothing to store (it lists %d tools).\n", name, res.Tools)
		return exitOK
	}
	fmt.Fprintf(stdout, "It lists %d tools.\n", res.Tools)
	return exitOK
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none named"
	}
	return strings.Join(s, " ")
}

func refreshNote(refreshable bool) string {
	if refreshable {
		return ", and is refreshed as it expires"
	}
	return "; the server gave no refresh token, so log in again when it expires"
}

// openBrowser shows the authorization URL: it prints it, and opens it
// with $BROWSER, else the platform's opener. A browser that cannot be
// started is not an error: the URL is on the terminal.
func openBrowser(ctx context.Context, url string, noBrowser bool, stderr io.Writer, log *slog.Logger) error {
	fmt.Fprintf(stderr, "Open this URL to authorize codemode (it waits for the answer):\n\n  %s\n\n", url)
	if noBrowser {
		return nil
	}
	name, args := browserCommand(url)
	if name == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "The browser could not be started (%v): open the URL above yourself.\n", err)
		return nil
	}
	go func() {
		if err := cmd.Wait(); err != nil {
			log.Debug("the browser command ended", "command", filepath.Base(name), "error", err)
		}
	}()
	return nil
}

// browserCommand is the command that opens url: $BROWSER (its first
// entry when it lists several), else xdg-open, open or the Windows URL
// handler.
func browserCommand(url string) (string, []string) {
	if b := os.Getenv(browserEnv); b != "" {
		first, _, _ := strings.Cut(b, string(os.PathListSeparator))
		fields := strings.Fields(first)
		if len(fields) > 0 {
			args := fields[1:]
			replaced := false
			for i, a := range args {
				if strings.Contains(a, "%s") {
					args[i] = strings.ReplaceAll(a, "%s", url)
					replaced = true
				}
			}
			if !replaced {
				args = append(args, url)
			}
			return fields[0], args
		}
	}
	switch runtime.GOOS {
	case "darwin":
		return "open", []string{url}
	case "windows":
		return "rundll32", []string{"url.dll,FileProtocolHandler", url}
	}
	return "xdg-open", []string{url}
}
