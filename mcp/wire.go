package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file answers malformed JSON-RPC input the way JSON-RPC 2.0 and the
// MCP transports prescribe, where the go-sdk (v1.8) does not: its stdio
// reader ends the session at the first line it cannot decode (so the
// process exits with no reply). That is fixed around the SDK, not in it:
// the input is checked with the SDK's own decoder (jsonrpc.DecodeMessage)
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
