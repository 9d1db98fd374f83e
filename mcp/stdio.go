package mcp

import (
	"bytes"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codemode-go/codemode/internal/redact"
)

// inheritedEnv lists the variables a stdio server inherits from the host,
// as the TypeScript SDK's getDefaultEnvironment does (plus TMPDIR, LANG and
// TZ, which change behaviour but hold no secrets): enough to find and run
// a program, nothing that authenticates.
func inheritedEnv() []string {
	if runtime.GOOS == "windows" {
		return []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE",
			"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "USERNAME", "USERPROFILE", "PROGRAMFILES", "COMSPEC"}
	}
	return []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "TMPDIR", "LANG", "TZ"}
}

// childEnv is the environment of a stdio server: the inherited minimum
// with the configured variables merged over it.
func childEnv(extra map[string]string) []string {
	env := map[string]string{}
	for _, k := range inheritedEnv() {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// command prepares the server process. It is started by the SDK's
// CommandTransport, which owns its stdin and stdout; stderr goes to the
// log, a line per record.
func (up *upstream) command() *exec.Cmd {
	cmd := exec.Command(up.cfg.Command, up.cfg.Args...)
	cmd.Env = childEnv(up.cfg.Env)
	cmd.Dir = up.cfg.Cwd
	cmd.Stderr = &lineLogger{log: up.log, red: up.red}
	// A grandchild that inherits stderr could hold it open after the
	// server exits; do not let that block the wait for the server.
	cmd.WaitDelay = time.Second
	return cmd
}

// maxLogLine bounds one stderr record.
const maxLogLine = 4096

// lineLogger logs each line written to it; a line longer than
// maxLogLine is logged in pieces.
type lineLogger struct {
	log *slog.Logger
	red *redact.Redactor
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLogLine - len(l.buf)
			if len(p) > room {
				l.buf = append(l.buf, p[:room]...)
				l.flushPiece()
				p = p[room:]
				continue
			}
			l.buf = append(l.buf, p...)
			break
		}
		l.buf = append(l.buf, p[:i]...)
		l.flush()
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineLogger) flush() {
	line := strings.TrimRight(string(l.buf), "\r")
	l.buf = l.buf[:0]
	l.emit(line)
}

// flushPiece logs a full buffer that is not yet a whole line. A cut could
// halve a secret into two pieces neither of which shows it, so the buffer
// is redacted whole, and its last Window bytes (where a secret crossing
// the cut would begin) are kept to start the next piece.
func (l *lineLogger) flushPiece() {
	text := l.red.String(string(l.buf))
	cut := len(text) - min(l.red.Window(), maxLogLine/2)
	for back := 0; back < utf8.UTFMax-1 && cut > 0 && cut < len(text) && !utf8.RuneStart(text[cut]); back++ {
		cut-- // not inside a character
	}
	l.buf = append(l.buf[:0], text[cut:]...)
	l.emit(text[:cut])
}

func (l *lineLogger) emit(line string) {
	if strings.TrimSpace(line) != "" {
		l.log.Info("server stderr", "line", sanitize(line, maxLogLine, l.red))
	}
}
