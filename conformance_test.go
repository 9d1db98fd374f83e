package codemode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/codemode-go/codemode/internal/enginebin"
	"github.com/codemode-go/codemode/internal/quickjs"
	"github.com/codemode-go/codemode/internal/sandbox"
)

// The conformance suite: language and contract cases whose expectations
// were derived by running node (oracle "node") or written from the
// contract (oracle "contract"). testdata/conformance/README.md defines the
// format and the tool-behaviour mini-language implemented here.

type confCase struct {
	ID       string          `json:"id"`
	Category string          `json:"category"`
	Tools    []confTool      `json:"tools"`
	Limits   *confLimits     `json:"limits"`
	Code     string          `json:"code"`
	Expect   confExpect      `json:"expect"`
	Oracle   string          `json:"oracle"`
	Tags     []string        `json:"tags"`
	Notes    string          `json:"notes"`
	Raw      json.RawMessage `json:"-"`
}

type confTool struct {
	Path         string          `json:"path"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema"`
	Validate     bool            `json:"validate"`
	Behavior     json.RawMessage `json:"behavior"`
}

type confLimits struct {
	TimeoutMs      *int `json:"timeoutMs"`
	MaxToolCalls   *int `json:"maxToolCalls"`
	MaxOutputBytes *int `json:"maxOutputBytes"`
}

type confExpect struct {
	OK               bool            `json:"ok"`
	Value            json.RawMessage `json:"value"`
	ValuePrefix      *string         `json:"value_prefix"`
	ValueType        *string         `json:"value_type"`
	Kind             string          `json:"kind"`
	MessageContains  *string         `json:"message_contains"`
	Location         *Location       `json:"location"`
	Logs             []string        `json:"logs"`
	LogsPrefix       []string        `json:"logs_prefix"`
	LogsCount        *int            `json:"logs_count"`
	ToolCalls        []string        `json:"toolCalls"`
	Truncated        bool            `json:"truncated"`
	ResultNotContain []string        `json:"result_not_contains"`
}

// loadConformance reads the shared cases and the project's own
// (project.jsonl: the diagnostics this project adds, in the same format).
func loadConformance(t testing.TB) []confCase {
	t.Helper()
	var cases []confCase
	for _, name := range []string{"cases.jsonl", "project.jsonl"} {
		cases = append(cases, loadCases(t, "testdata/conformance/"+name)...)
	}
	return cases
}

func loadCases(t testing.TB, path string) []confCase {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []confCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var c confCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("bad case line: %v", err)
		}
		var raw map[string]json.RawMessage
		_ = json.Unmarshal(line, &raw)
		if _, ok := raw["expect"]; ok {
			// An expectation the runner does not know would pass unseen.
			dec := json.NewDecoder(bytes.NewReader(raw["expect"]))
			dec.DisallowUnknownFields()
			if err := dec.Decode(new(confExpect)); err != nil {
				t.Fatalf("case %s: expect: %v", c.ID, err)
			}
			var ex map[string]json.RawMessage
			_ = json.Unmarshal(raw["expect"], &ex)
			if _, ok := ex["logs"]; ok && c.Expect.Logs == nil {
				c.Expect.Logs = []string{}
			}
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestConformanceCopy keeps the vendored suite identical to the shared one
// when the shared checkout is present.
func TestConformanceCopy(t *testing.T) {
	shared, err := os.ReadFile("../shared/conformance/cases.jsonl")
	if err != nil {
		t.Skip("the shared conformance suite is not checked out next to this repository")
	}
	ours, err := os.ReadFile("testdata/conformance/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shared, ours) {
		t.Fatal("testdata/conformance/cases.jsonl differs from ../shared/conformance/cases.jsonl; copy it again")
	}
}

func TestConformance(t *testing.T) {
	h := newConfHost(t)
	for _, c := range loadConformance(t) {
		t.Run(c.ID, func(t *testing.T) {
			t.Parallel()
			h.run(t, c)
		})
	}
}

// confHost runs cases; it owns an engine for the "js" behaviour, and idle
// instances of it: a fresh instance per call costs milliseconds on a
// loaded machine, enough to reorder calls whose order a case checks
// (Promise.any between a 5 ms and a 40 ms call). The behaviours are pure
// functions, so an instance can serve one call after another.
type confHost struct {
	engine *quickjs.Engine
	idle   chan *quickjs.Instance
}

func newConfHost(t *testing.T) *confHost {
	ctx := context.Background()
	wasm, _, err := enginebin.Resolve(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := quickjs.Config{Wasm: wasm, CacheDir: os.Getenv(confCacheEnv)}
	if cfg.CacheDir != "" {
		// The key the Runtime's engine signs the same directory with.
		if cfg.CacheKey, _, err = sandbox.CacheKey(); err != nil {
			t.Fatal(err)
		}
	}
	e, err := quickjs.NewEngine(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &confHost{engine: e, idle: make(chan *quickjs.Instance, 16)}
	t.Cleanup(func() {
		for {
			select {
			case in := <-h.idle:
				in.Close()
				continue
			default:
			}
			break
		}
		_ = e.Close(ctx)
	})
	return h
}

// caseRun is the per-run state the behaviours share. Calls are counted
// by the runtime's hooks, which see every call of every tool when it is
// granted its slot and when it ends, not when its Go function is entered.
type caseRun struct {
	h         *confHost
	mu        sync.Mutex
	callIndex map[string]int
	startSeq  int
	active    int
	running   map[context.Context]*callState // by the call's context, which the hooks and Run share
}

// callState is what the probe behaviour reports of its own call.
type callState struct{ startSeq, activeAtStart, maxActive int }

func (cr *caseRun) started(ctx context.Context, _ Call) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.active++
	cs := &callState{startSeq: cr.startSeq, activeAtStart: cr.active}
	cr.startSeq++
	cr.running[ctx] = cs
	for _, q := range cr.running {
		q.maxActive = max(q.maxActive, cr.active)
	}
}

func (cr *caseRun) ended(ctx context.Context, _ CallEnd) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.active--
	delete(cr.running, ctx)
}

func (h *confHost) run(t *testing.T, c confCase) {
	res, err := Execute(context.Background(), h.options(t, c), c.Code)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if msg := checkExpect(c.Expect, res); msg != "" {
		t.Errorf("%s\ncode: %s\nresult: %s\nnotes: %s", msg, c.Code, clip(res), c.Notes)
	}
}

// clip is a Result's JSON, cut for a test message.
func clip(res Result) []byte {
	b, _ := json.Marshal(res)
	if len(b) > 2000 {
		b = append(b[:2000], "..."...)
	}
	return b
}

// options are the Runtime options of a case: its tools, served by its
// behaviours, and its limits.
func (h *confHost) options(t *testing.T, c confCase) Options {
	cr := &caseRun{h: h, callIndex: map[string]int{}, running: map[context.Context]*callState{}}
	tools := Tools{}
	for _, ct := range c.Tools {
		// Every dot is a level: aws.s3.listBuckets is tools.aws.s3.listBuckets.
		segs := strings.Split(ct.Path, ".")
		if len(segs) < 2 {
			t.Fatalf("tool path %q has no namespace", ct.Path)
		}
		tool := Tool{Description: ct.Description, SkipInputValidation: !ct.Validate}
		if len(ct.InputSchema) > 0 && string(ct.InputSchema) != "null" {
			tool.Input = new(jsonschema.Schema)
			if err := json.Unmarshal(ct.InputSchema, tool.Input); err != nil {
				t.Fatalf("input schema of %s: %v", ct.Path, err)
			}
		}
		if len(ct.OutputSchema) > 0 && string(ct.OutputSchema) != "null" {
			tool.Output = new(jsonschema.Schema)
			if err := json.Unmarshal(ct.OutputSchema, tool.Output); err != nil {
				t.Fatalf("output schema of %s: %v", ct.Path, err)
			}
		}
		path, behavior := ct.Path, ct.Behavior
		tool.Run = func(ctx context.Context, input json.RawMessage) (any, error) {
			cr.mu.Lock()
			k := cr.callIndex[path]
			cr.callIndex[path]++
			cr.mu.Unlock()
			return cr.behave(ctx, behavior, input, k)
		}
		node := tools
		for _, seg := range segs[:len(segs)-1] {
			sub, _ := node[seg].(Tools)
			if sub == nil {
				sub = Tools{}
				node[seg] = sub
			}
			node = sub
		}
		node[segs[len(segs)-1]] = tool
	}
	opts := Options{Tools: tools, Timeout: 10 * time.Second, OnToolCallStart: cr.started, OnToolCallEnd: cr.ended}
	if l := c.Limits; l != nil {
		if l.TimeoutMs != nil {
			opts.Timeout = time.Duration(*l.TimeoutMs) * time.Millisecond
		}
		if l.MaxToolCalls != nil {
			opts.MaxToolCalls = zeroMeansNone(*l.MaxToolCalls)
		}
		if l.MaxOutputBytes != nil {
			opts.MaxOutputBytes = zeroMeansNone(*l.MaxOutputBytes)
		}
	}
	return opts
}

// zeroMeansNone maps the suite's "0 = none allowed" to Options' negative.
func zeroMeansNone(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

type behavior struct {
	Type    string            `json:"type"`
	Value   json.RawMessage   `json:"value"`
	Name    string            `json:"name"`
	Message string            `json:"message"`
	Ms      float64           `json:"ms"`
	MsField string            `json:"msField"`
	Then    json.RawMessage   `json:"then"`
	Items   []json.RawMessage `json:"items"`
	Field   string            `json:"field"`
	Cases   []struct {
		Equals json.RawMessage `json:"equals"`
		Then   json.RawMessage `json:"then"`
	} `json:"cases"`
	Default json.RawMessage `json:"default"`
	Source  string          `json:"source"`
}

func (cr *caseRun) behave(ctx context.Context, raw json.RawMessage, input json.RawMessage, k int) (any, error) {
	var b behavior
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("bad behavior: %v", err)
	}
	var in any
	_ = json.Unmarshal(input, &in)
	obj, _ := in.(map[string]any)
	switch b.Type {
	case "echo":
		return input, nil
	case "return":
		return b.Value, nil
	case "merge":
		// {...input, ...value}: the input's keys in order, then the new
		// ones; a key given again keeps its place and takes the new value.
		return mergeOrdered(input, b.Value), nil
	case "field":
		if v, ok := orderedFields(input)[b.Name]; ok {
			return v, nil
		}
		return nil, nil
	case "toolError":
		return nil, ToolError(b.Message)
	case "hostError":
		return nil, errors.New(b.Message)
	case "sleep":
		ms := b.Ms
		if b.MsField != "" {
			if v, ok := obj[b.MsField].(float64); ok {
				ms = v
			}
		}
		if err := sleepCtx(ctx, ms); err != nil {
			return nil, err
		}
		if len(b.Then) == 0 {
			return nil, nil
		}
		return cr.behave(ctx, b.Then, input, k)
	case "sequence":
		if len(b.Items) == 0 {
			return nil, nil
		}
		return cr.behave(ctx, b.Items[min(k, len(b.Items)-1)], input, k)
	case "switch":
		for _, c := range b.Cases {
			var want any
			_ = json.Unmarshal(c.Equals, &want)
			if reflect.DeepEqual(want, obj[b.Field]) {
				return cr.behave(ctx, c.Then, input, k)
			}
		}
		if len(b.Default) > 0 {
			return cr.behave(ctx, b.Default, input, k)
		}
		return input, nil
	case "probe":
		err := sleepCtx(ctx, b.Ms)
		cr.mu.Lock()
		st := cr.running[ctx]
		cr.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if st == nil {
			return nil, errors.New("probe: the call was not reported as started")
		}
		return json.RawMessage(fmt.Sprintf(`{"input":%s,"startSeq":%d,"activeAtStart":%d,"maxActive":%d}`,
			input, st.startSeq, st.activeAtStart, st.maxActive)), nil
	case "js":
		return cr.h.runJS(b.Source, input, k)
	}
	return nil, fmt.Errorf("unknown behavior %q", b.Type)
}

func sleepCtx(ctx context.Context, ms float64) error {
	if ms <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(time.Duration(ms * float64(time.Millisecond)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runJS evaluates a pure JS behaviour in an engine instance of its own
// (apart from the run's).
func (h *confHost) runJS(source string, input json.RawMessage, k int) (any, error) {
	var in *quickjs.Instance
	select {
	case in = <-h.idle:
	default:
		var err error
		if in, err = h.engine.NewInstance(context.Background(), quickjs.InstanceConfig{}); err != nil {
			return nil, err
		}
	}
	defer func() {
		select {
		case h.idle <- in:
		default:
			in.Close()
		}
	}()
	// A throw is a hostError whose message is the thrown one, so a case
	// can check that it never reaches the Result.
	code := fmt.Sprintf(`(() => {
		try { const r = (%s)(%s, %d); return "1" + JSON.stringify(r === undefined ? null : r) }
		catch (e) { return "0" + String(e instanceof Error ? e.message : e) }
	})()`, source, input, k)
	v, err := in.Eval(code, "behavior.js", quickjs.EvalStrict)
	if err != nil {
		var exc *quickjs.Exception
		if errors.As(err, &exc) {
			in.Free(exc.Value)
		}
		return nil, errors.New("the js behaviour does not compile")
	}
	defer in.Free(v)
	s, err := in.String(v)
	if err != nil {
		return nil, err
	}
	if s[0] == '0' {
		return nil, errors.New(s[1:])
	}
	return json.RawMessage(s[1:]), nil
}

// checkExpect compares a Result with an expectation, returning "" when it
// matches.
func checkExpect(ex confExpect, res Result) string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if res.OK != ex.OK {
		bad("ok = %v, want %v (error: %+v)", res.OK, ex.OK, res.Error)
		return strings.Join(problems, "; ")
	}
	if ex.OK {
		if len(ex.Value) > 0 && !jsonEqual(res.Value, ex.Value) {
			bad("value = %s, want %s", res.Value, ex.Value)
		}
		if ex.ValuePrefix != nil {
			var s string
			if json.Unmarshal(res.Value, &s) != nil || !strings.HasPrefix(s, *ex.ValuePrefix) {
				bad("value = %s, want a string starting with %q", res.Value, *ex.ValuePrefix)
			}
		}
		if ex.ValueType != nil {
			if got := jsonType(res.Value); got != *ex.ValueType {
				bad("value type = %s, want %s", got, *ex.ValueType)
			}
		}
	} else {
		if res.Error == nil {
			bad("no error")
		} else {
			if string(res.Error.Kind) != ex.Kind {
				bad("kind = %s (%s), want %s", res.Error.Kind, res.Error.Message, ex.Kind)
			}
			if ex.MessageContains != nil && !strings.Contains(res.Error.Message, *ex.MessageContains) {
				bad("message %q does not contain %q", res.Error.Message, *ex.MessageContains)
			}
			if ex.Location != nil && (res.Error.Location == nil || *res.Error.Location != *ex.Location) {
				bad("location = %+v, want %+v", res.Error.Location, *ex.Location)
			}
		}
	}
	logs := res.Logs
	if logs == nil {
		logs = []string{}
	}
	if ex.Logs != nil && !reflect.DeepEqual(logs, ex.Logs) {
		bad("logs = %q, want %q", logs, ex.Logs)
	}
	if ex.LogsPrefix != nil && (len(logs) < len(ex.LogsPrefix) || !reflect.DeepEqual(logs[:len(ex.LogsPrefix)], ex.LogsPrefix)) {
		bad("logs = %q, want prefix %q", logs, ex.LogsPrefix)
	}
	if ex.LogsCount != nil && len(logs) != *ex.LogsCount {
		bad("%d log lines, want %d", len(logs), *ex.LogsCount)
	}
	if ex.ToolCalls != nil {
		var names []string
		for _, c := range res.ToolCalls {
			names = append(names, c.Name)
		}
		if names == nil {
			names = []string{}
		}
		if !reflect.DeepEqual(names, ex.ToolCalls) {
			bad("toolCalls = %q, want %q", names, ex.ToolCalls)
		}
	}
	if ex.Truncated != res.Truncated {
		bad("truncated = %v, want %v", res.Truncated, ex.Truncated)
	}
	if len(ex.ResultNotContain) > 0 {
		// As JSON.stringify would write it: json.Marshal escapes <, > and &,
		// which would hide a secret that holds them.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(res)
		for _, s := range ex.ResultNotContain {
			if strings.Contains(buf.String(), s) {
				bad("result contains %q", s)
			}
		}
	}
	return strings.Join(problems, "; ")
}

// orderedFields decodes a JSON object's fields, each as its raw JSON.
func orderedFields(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return m
}

// objectKeys lists a JSON object's keys in document order.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

// mergeOrdered is {...a, ...b} for JSON objects, keeping key order.
func mergeOrdered(a, b json.RawMessage) json.RawMessage {
	fa, fb := orderedFields(a), orderedFields(b)
	var buf bytes.Buffer
	buf.WriteByte('{')
	n := 0
	write := func(k string, v json.RawMessage) {
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(v)
	}
	for _, k := range objectKeys(a) {
		if v, ok := fb[k]; ok {
			write(k, v)
		} else {
			write(k, fa[k])
		}
	}
	for _, k := range objectKeys(b) {
		if _, ok := fa[k]; !ok {
			write(k, fb[k])
		}
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func jsonType(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "invalid"
	}
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}
