package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/codemode-go/codemode/internal/redact"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
// and the variables named in inherit, with the configured variables
// merged over them.
func childEnv(extra map[string]string, inherit []string) []string {
	env := map[string]string{}
	for _, k := range append(inheritedEnv(), inherit...) {
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

// process prepares the server process; stderr goes to the log, a line per
// record, and its last lines are kept for the error of a failed start.
func (up *upstream) process() *process {
	cmd := exec.Command(up.cfg.Command, up.cfg.Args...)
	cmd.Env = childEnv(up.cfg.Env, up.cfg.EnvInherit)
	cmd.Dir = up.cfg.Cwd
	stderr := &lineLogger{log: up.log, red: up.red()}
	cmd.Stderr = stderr
	// A grandchild that inherits stderr could hold it open after the
	// server exits; do not let that block the wait for the server.
	cmd.WaitDelay = time.Second
	return &process{cmd: cmd, stderr: stderr, terminate: 2 * time.Second}
}

// process is the transport of a stdio server. It runs the command as the
// SDK's CommandTransport does (newline-delimited JSON on stdin and
// stdout; closing it closes stdin, then sends SIGTERM, then SIGKILL) but
// also learns how the process ended, as soon as it ends, so that a server
// that dies before the handshake is reported by its exit status and last
// stderr lines rather than by the EOF the client saw.
type process struct {
	cmd       *exec.Cmd
	stderr    *lineLogger
	terminate time.Duration // how long each step of closing waits for the exit

	exited  chan struct{} // closed once Wait has returned; nil before Start
	waitErr error         // Wait's error; read only after exited is closed

	closing    atomic.Bool // the client began closing the connection
	endedFirst atomic.Bool // the process ended before that
}

// Connect starts the command.
func (p *process) Connect(ctx context.Context) (mcpsdk.Connection, error) {
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of our own rather than StdoutPipe, which Wait closes as soon
	// as the process exits, possibly before its last message is read:
	// with ours, the process can be waited for from the start.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout = w
	if err := p.cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, err
	}
	_ = w.Close() // the child has its copy; EOF comes when it exits
	p.exited = make(chan struct{})
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	conn := &mcpsdk.IOTransport{Reader: &processOutput{p: p, r: r}, Writer: &processInput{p: p, stdin: stdin, stdout: r}}
	return conn.Connect(ctx)
}

// ended reports whether the process ended on its own: its output ended,
// or it exited, before the client began closing it. A failure then is the
// server's doing, and its exit status says why; otherwise it exited
// because it was told to.
func (p *process) ended() bool { return p.endedFirst.Load() }

// processOutput is the read side of the connection.
type processOutput struct {
	p *process
	r io.Reader
}

func (out *processOutput) Read(b []byte) (int, error) {
	n, err := out.r.Read(b)
	if err == io.EOF && !out.p.closing.Load() {
		out.p.endedFirst.Store(true)
	}
	return n, err
}

// Close does nothing: the connection is closed by closing the server's
// input (processInput.Close), not its output, which it may still write.
func (out *processOutput) Close() error { return nil }

// exit describes how the process ended ("exited with status 1", "was
// killed by signal: killed"), or reports false while it runs or when it
// never started.
func (p *process) exit() (string, bool) {
	if p.exited == nil {
		return "", false
	}
	select {
	case <-p.exited:
	default:
		return "", false
	}
	if p.cmd.ProcessState == nil {
		return fmt.Sprintf("ended: %v", p.waitErr), true
	}
	if code := p.cmd.ProcessState.ExitCode(); code >= 0 {
		return fmt.Sprintf("exited with status %d", code), true
	}
	return "was stopped (" + p.cmd.ProcessState.String() + ")", true
}

// processInput is the write side of the connection; closing it shuts the
// process down as the MCP specification asks of a stdio client.
type processInput struct {
	p      *process
	stdin  io.WriteCloser
	stdout io.Closer
}

func (in *processInput) Write(b []byte) (int, error) { return in.stdin.Write(b) }

// Close closes the server's input, waits for it to exit, then sends
// SIGTERM, then SIGKILL, and finally closes its output.
func (in *processInput) Close() error {
	defer in.stdout.Close()
	if !in.p.closing.Swap(true) {
		select {
		case <-in.p.exited:
			in.p.endedFirst.Store(true)
		default:
		}
	}
	_ = in.stdin.Close() // Wait may have closed it already
	wait := func() bool {
		t := time.NewTimer(in.p.terminate)
		defer t.Stop()
		select {
		case <-in.p.exited:
			return true
		case <-t.C:
			return false
		}
	}
	if wait() {
		return nil
	}
	if err := in.p.cmd.Process.Signal(syscall.SIGTERM); err == nil && wait() {
		return nil
	}
	if err := in.p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	if wait() {
		return nil
	}
	return errors.New("the server process did not exit after SIGKILL")
}

// maxLogLine bounds one stderr record.
const maxLogLine = 4096

// tailLines is how many of a server's last stderr lines the error of a
// failed start quotes: enough for npm's block of "npm error" lines, whose
// first says what went wrong.
const tailLines = 8

// maxTailLine bounds one quoted line.
const maxTailLine = 300

// lineLogger logs each line written to it; a line longer than
// maxLogLine is logged in pieces. It keeps the last tailLines lines.
type lineLogger struct {
	log  *slog.Logger
	red  *redact.Redactor
	mu   sync.Mutex
	buf  []byte
	tail []string // the last lines, cleaned and redacted
}

// last returns the last lines written, the unfinished one included.
func (l *lineLogger) last() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.tail...)
	if rest := sanitize(string(l.buf), maxTailLine, l.red); rest != "" {
		out = append(out, rest)
	}
	return out[max(0, len(out)-tailLines):]
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
	if strings.TrimSpace(line) == "" {
		return
	}
	l.log.Info("server stderr", "line", sanitize(line, maxLogLine, l.red))
	if len(l.tail) == tailLines {
		l.tail = append(l.tail[:0], l.tail[1:]...)
	}
	l.tail = append(l.tail, sanitize(line, maxTailLine, l.red))
}
