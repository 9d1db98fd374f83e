package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file answers malformed JSON-RPC input the way JSON-RPC 2.0 and the
// MCP transports prescribe, where the go-sdk (v1.8) does not: its stdio
// reader ends the session at the first line it cannot decode (so the
// process exits with no reply), and its HTTP handler answers such a POST
// with a plain-text 400. Both are fixed around the SDK, not in it: the
// input is checked with the SDK's own decoder (jsonrpc.DecodeMessage)
// before the SDK sees it, and what the SDK would choke on is answered
// here and kept from it.

// batchesEnd is the first protocol version without JSON-RPC batches; the
// SDK refuses a batch from then on (and a version compares as a string).
const batchesEnd = "2025-06-18"

// rpcError is a JSON-RPC error response. ID is the request's id, or null
// when it could not be read, as JSON-RPC 2.0 (section 5) requires.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcErrorBody    `json:"error"`
}

type rpcErrorBody struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

func newRPCError(id json.RawMessage, code int64, format string, args ...any) *rpcError {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return &rpcError{JSONRPC: "2.0", ID: id, Error: rpcErrorBody{Code: code, Message: fmt.Sprintf(format, args...)}}
}

func (e *rpcError) encode() []byte {
	b, _ := json.Marshal(e) // cannot fail: ID is valid JSON
	return b
}

// checkMessage says whether the SDK can take data, one line on stdio or
// one POST body: nil if so, or the error response to send instead. Parse
// errors are -32700; JSON that is not a JSON-RPC message (no
// "jsonrpc":"2.0", a number, an empty or a refused batch) is -32600.
// batches is whether the negotiated version still has JSON-RPC batches.
func checkMessage(data []byte, batches bool) *rpcError {
	if !json.Valid(data) {
		return newRPCError(nil, jsonrpc.CodeParseError, "parse error: the message is not valid JSON")
	}
	data = bytes.TrimSpace(data)
	if data[0] != '[' {
		if _, err := jsonrpc.DecodeMessage(data); err != nil {
			return newRPCError(messageID(data), jsonrpc.CodeInvalidRequest, "invalid request: %v", err)
		}
		return nil
	}
	if !batches {
		return newRPCError(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not part of MCP since version %s", batchesEnd)
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(data, &batch); err != nil || len(batch) == 0 {
		return newRPCError(nil, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch")
	}
	// The SDK ends the session for any bad element, or two calls with one
	// id; the batch is refused whole.
	ids := map[jsonrpc.ID]bool{}
	for _, raw := range batch {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return newRPCError(nil, jsonrpc.CodeInvalidRequest, "invalid request: in the batch: %v", err)
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if ids[req.ID] {
				return newRPCError(nil, jsonrpc.CodeInvalidRequest, "invalid request: the batch repeats the id %v", req.ID.Raw())
			}
			ids[req.ID] = true
		}
	}
	return nil
}

// messageID returns the id of a message that could not be decoded, when
// it has one of a valid type (a string or a number), or nil.
func messageID(data []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(m.ID, &v) != nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return m.ID
	}
	return nil
}

// StdioTransport is the transport to serve a server on over
// newline-delimited JSON (standard input and output): the SDK's
// IOTransport, with each line checked first. A line the SDK could not
// take, which would end its session, is answered here (-32700 for one
// that is not JSON, -32600 for one that is not a JSON-RPC message, a
// refused batch or a line over the SDK's length limit; id null when it
// cannot be read) and dropped, and the session goes on. Closing the
// connection closes r; w is never closed.
func StdioTransport(r io.ReadCloser, w io.Writer) mcpsdk.Transport {
	return stdioTransport(r, w, maxStdioLine)
}

// stdioTransport is StdioTransport with lines of at most limit bytes.
func stdioTransport(r io.ReadCloser, w io.Writer, limit int) mcpsdk.Transport {
	out := &stdioOut{w: w}
	return &mcpsdk.IOTransport{
		Reader: &lineChecker{src: bufio.NewReader(r), closer: r, out: out, limit: limit},
		Writer: out,
	}
}

// maxStdioLine is the longest line passed to the SDK: under its limit
// (DefaultMaxLineLength, the line with its newline), past which it ends
// the session; a longer line is answered here instead.
const maxStdioLine = mcpsdk.DefaultMaxLineLength - 2

// lineChecker reads lines from src and passes the SDK those it can take.
type lineChecker struct {
	src    *bufio.Reader
	closer io.Closer
	out    *stdioOut
	limit  int

	line    []byte // the line being read
	pending []byte // what the SDK has yet to read of the last good line
	err     error  // src's error, returned once pending is read
}

func (c *lineChecker) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		line, tooLong, err := c.readLine()
		c.err = err
		switch {
		case tooLong:
			c.out.reply(newRPCError(nil, jsonrpc.CodeInvalidRequest, "invalid request: a message longer than %d bytes", c.limit))
		case len(bytes.TrimSpace(line)) == 0: // blank lines are skipped, as the SDK's decoder does
		default:
			if e := checkMessage(line, c.out.batches()); e != nil {
				c.out.reply(e)
				continue
			}
			c.out.watchInitialize(line)
			c.pending = append(line, '\n')
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// readLine reads up to the next newline. A line over the limit is read
// to its end but not kept (tooLong).
func (c *lineChecker) readLine() (line []byte, tooLong bool, err error) {
	c.line = c.line[:0]
	for {
		frag, err := c.src.ReadSlice('\n')
		if !tooLong {
			if len(c.line)+len(frag) > c.limit+1 {
				tooLong = true
			} else {
				c.line = append(c.line, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line := bytes.TrimRight(c.line, "\r\n")
		if tooLong {
			line = nil
		}
		return line, tooLong, err
	}
}

// Close closes the source, which unblocks a read in progress.
func (c *lineChecker) Close() error { return c.closer.Close() }

// stdioOut writes the server's messages and the checker's replies, one
// whole line per Write (as the SDK writes), so the two never interleave.
// It also learns the negotiated protocol version from the answer to
// initialize, since batches are refused from 2025-06-18 on.
type stdioOut struct {
	w io.Writer

	mu      sync.Mutex
	initID  *jsonrpc.ID // the id of the initialize request awaiting its answer
	version string      // the negotiated protocol version, once known
}

func (o *stdioOut) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.initID != nil {
		if msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(b)); err == nil {
			if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID == *o.initID {
				o.initID = nil
				var res struct {
					ProtocolVersion string `json:"protocolVersion"`
				}
				if resp.Error == nil && json.Unmarshal(resp.Result, &res) == nil {
					o.version = res.ProtocolVersion
				}
			}
		}
	}
	return o.w.Write(b)
}

// Close does nothing: standard output stays open.
func (o *stdioOut) Close() error { return nil }

func (o *stdioOut) reply(e *rpcError) {
	_, _ = o.Write(append(e.encode(), '\n')) // a failed write ends the session on the SDK's next one
}

// watchInitialize notes the id of an initialize request in line.
func (o *stdioOut) watchInitialize(line []byte) {
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return // a batch: not how initialize comes
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" && req.IsCall() {
		o.mu.Lock()
		o.initID = &req.ID
		o.mu.Unlock()
	}
}

func (o *stdioOut) batches() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.version == "" || o.version < batchesEnd
}

// rpcErrors wraps the SDK's streamable HTTP handler (next) so that its
// refusals of a POST are JSON-RPC errors, as the MCP transport allows
// ("the HTTP response body MAY comprise a JSON-RPC error response") and
// JSON-RPC clients can read, instead of the SDK's plain text:
//
//   - a body that is not JSON gets 400 with -32700, one that is not a
//     JSON-RPC message (or a batch the protocol version refuses) 400
//     with -32600; both are checked here, with the SDK's decoder;
//   - a request other than initialize without an Mcp-Session-Id gets 400
//     with -32600, as the transport prescribes (the SDK would open a
//     session for it and answer 200 with an error of code 0);
//   - a call of a method the server does not have gets -32601 with the
//     call's id, with status 200 like any other JSON-RPC response (what
//     it gets over stdio); the SDK refuses it with a plain-text 400
//     before the session sees it;
//   - any other plain-text 400 the SDK writes for a POST (a missing
//     params, an id on a notification) becomes 400 with -32600.
//
// Requests of the sessionless protocol (2026-07-28, which a stateful
// server refuses with an error its clients fall back on) go to the SDK
// as they are.
func rpcErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); r.Method != http.MethodPost || mt != "application/json" {
			next.ServeHTTP(w, r) // the SDK answers 405, 415, or serves a GET or DELETE
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcpsdk.DefaultMaxRequestBodyBytes))
		if err != nil {
			status := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				status = http.StatusRequestEntityTooLarge
			}
			writeRPCError(w, status, newRPCError(nil, jsonrpc.CodeInvalidRequest, "invalid request: reading the body: %v", err))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		version := r.Header.Get("Mcp-Protocol-Version")
		if e := checkMessage(body, version == "" || version < batchesEnd); e != nil {
			writeRPCError(w, http.StatusBadRequest, e)
			return
		}
		req, _ := jsonrpc.DecodeMessage(body) // nil for a batch
		call, _ := req.(*jsonrpc.Request)
		var id json.RawMessage
		if call != nil && call.IsCall() {
			id, _ = json.Marshal(call.ID.Raw())
		}
		if r.Header.Get("Mcp-Session-Id") == "" && !opensSession(body, call, version) {
			writeRPCError(w, http.StatusBadRequest, newRPCError(id, jsonrpc.CodeInvalidRequest,
				"invalid request: an Mcp-Session-Id header is required; only initialize starts a session"))
			return
		}
		rw := &refusals{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		if !rw.refused {
			return
		}
		msg := strings.TrimSpace(rw.text.String())
		switch {
		case call != nil && strings.Contains(msg, "not handled") && id != nil:
			writeRPCError(w, http.StatusOK, newRPCError(id, jsonrpc.CodeMethodNotFound, "method not found: %q", call.Method))
		case call != nil && strings.Contains(msg, "not handled"):
			writeRPCError(w, http.StatusBadRequest, newRPCError(nil, jsonrpc.CodeMethodNotFound, "method not found: %q", call.Method))
		default:
			writeRPCError(w, http.StatusBadRequest, newRPCError(id, jsonrpc.CodeInvalidRequest, "invalid request: %s", msg))
		}
	})
}

// opensSession says whether a POST without a session id may go to the
// SDK: an initialize (alone or in a batch), or a request of the
// sessionless protocol (server/discover, or one that names a version
// from 2026-07-28 on), which the SDK answers itself.
func opensSession(body []byte, call *jsonrpc.Request, version string) bool {
	if version >= "2026-07-28" {
		return true
	}
	if call == nil { // a batch (or a response): does it hold an initialize?
		var batch []struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &batch)
		return slices.ContainsFunc(batch, func(m struct {
			Method string `json:"method"`
		}) bool {
			return m.Method == "initialize"
		})
	}
	if call.Method == "initialize" || call.Method == "server/discover" {
		return true
	}
	var params struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(call.Params, &params)
	_, ok := params.Meta[mcpsdk.MetaKeyProtocolVersion]
	return ok
}

func writeRPCError(w http.ResponseWriter, status int, e *rpcError) {
	w.Header().Del("X-Content-Type-Options")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(e.encode())
}

// refusals passes the SDK's response through, except a plain-text 400
// (its http.Error), which it keeps for rpcErrors to rewrite.
type refusals struct {
	http.ResponseWriter
	refused bool
	text    bytes.Buffer
}

func (rw *refusals) WriteHeader(status int) {
	if status == http.StatusBadRequest && strings.HasPrefix(rw.Header().Get("Content-Type"), "text/plain") {
		rw.refused = true
		return
	}
	rw.ResponseWriter.WriteHeader(status)
}

func (rw *refusals) Write(b []byte) (int, error) {
	if rw.refused {
		if rw.text.Len() < 1024 {
			rw.text.Write(b)
		}
		return len(b), nil
	}
	return rw.ResponseWriter.Write(b)
}

// Unwrap lets the SDK flush its event streams (http.ResponseController).
func (rw *refusals) Unwrap() http.ResponseWriter { return rw.ResponseWriter }
