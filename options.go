package codemode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codemode-go/codemode/store"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a [Runtime]. The zero value of every field means its
// documented default.
type Options struct {
	// Tools is the tool tree programs can call.
	Tools Tools

	// Timeout bounds each run; zero means no limit. When it expires the run
	// fails with TimeoutExceeded, keeps its logs, and the contexts of its
	// tool calls are cancelled.
	Timeout time.Duration

	// MaxToolCalls bounds the tool calls a run may make; further calls
	// reject with a catchable ToolCallLimitExceeded. Zero means no limit; a
	// negative value allows none.
	MaxToolCalls int

	// MaxOutputBytes bounds the bytes a Result carries: the value's JSON
	// plus each log line and a newline. Going over never fails a run: an
	// oversized value becomes a string holding its cut serialization and a
	// marker, logs are kept from the start until the budget is spent and
	// then a marker line, and Truncated is set. A failed run's message is
	// cut to the budget the same way (it does not reduce the logs' share).
	// Zero means no limit; a negative value means a budget of zero bytes.
	MaxOutputBytes int

	// MaxMemoryBytes is the engine memory each run may allocate; beyond it
	// the run fails with MemoryLimitExceeded. Zero means 64 MiB; it must
	// lie between 1 MiB and 2 GiB.
	MaxMemoryBytes int64

	// MaxConcurrency is how many tool calls of one run execute at once;
	// the rest wait in call order. Zero means 8.
	MaxConcurrency int

	// OnToolCallStart and OnToolCallEnd observe tool calls: a call starts
	// once it has its concurrency slot (and, in a suspended run, when
	// RunPending makes it). A call the Policy or Approve denies is
	// reported too, its start and at once its end, with OutcomeDenied and
	// the message the program saw. They run on
	// the calls' goroutines (so concurrently) and cannot fail the run: a
	// panic in a hook is recovered and ignored. ctx is the call's: it
	// carries the values of the context given to Execute (so a hook can
	// tell runs apart) and the call's span (see TracerProvider), and ends
	// with the run or a lost Promise.race.
	OnToolCallStart func(ctx context.Context, call Call)
	OnToolCallEnd   func(ctx context.Context, end CallEnd)

	// Policy, when set, decides about every call of a host tool before it
	// runs, inside transactions too: Allow, Deny (the program gets a
	// ToolError with the reason and the audit says "denied") or Ask. Any
	// other answer, Unset included, denies, as does a panic. A
	// transaction's begin is judged by every tool it declares
	// (Call.Declared). It is called on the run's goroutine, in call
	// order, with the run's context, so it must be quick: a policy that
	// needs to consult someone answers Ask. Rules.Policy makes one from
	// declared rules.
	//
	// In a suspendable run (ExecuteSuspendable, Resume), calls the policy
	// allows run at once, and those it asks about wait as pending calls
	// (PendingCall.Reason is the question) for as long as the decision
	// takes; without a Policy every call waits. In Execute, Approve
	// answers Ask.
	Policy func(ctx context.Context, call Call) Decision

	// Approve answers the calls Policy asks about in Execute, on the
	// call's goroutine: it may block (the run's Timeout still runs, and
	// ctx ends with the run). Anything but Allow denies the call, with the
	// decision's reason. Nil denies every such call.
	Approve func(ctx context.Context, call Call, question string) Decision

	// MaxAskInputBytes bounds the input of a call the policy asks about,
	// as a person is shown it (Call.Shown): whoever approves a call sees
	// all of its input, so a larger one is denied (the program reads
	// why) rather than shown in part. Zero means DefaultMaxAskInputBytes.
	MaxAskInputBytes int

	// CompensationGrace bounds undoing a transaction (see
	// tools.$codemode.begin): when a run ends with one open, or the
	// program rolls one back, its calls still running get this long to
	// return, and then each compensation gets this long. A compensation
	// still running then is abandoned, as a tool call that ignores its
	// context is, and reported as not undone; the next one goes on. So
	// Execute returns at most (1 + compensations) times this long after
	// its run ends. Zero means DefaultCompensationGrace.
	CompensationGrace time.Duration

	// Values, when set, gives programs tools.$codemode.store, load and
	// keys: JSON values kept for their session (WithSession) from one run
	// to the next, each at most store.MaxValueBytes.
	// store.NewMemoryValues keeps them in this process's memory,
	// store.OpenDirValues in a directory shared by the processes of a
	// machine; nil means programs keep nothing. A host drops a session's
	// values when it ends (Values.Drop; the MCP server does).
	Values store.Values

	// RichContent lets a program return content: an object in its value
	// shaped as an MCP content item — {type: "image" or "audio", mimeType,
	// data (base64)}, or {type: "resource", uri, mimeType?, blob or text},
	// with nothing else but a size — is moved to Result.Content, and the
	// value keeps a stand-in {type, mimeType, size, content: n} (n its
	// place in Content, from 1). Items past MaxContentBytes stay out, their
	// stand-in saying so (omitted), and Truncated is set. The content does
	// not count against MaxOutputBytes. Off, such objects are data like
	// any other.
	RichContent bool

	// MaxContentBytes bounds the decoded bytes of one Result's Content.
	// Zero means DefaultMaxContentBytes.
	MaxContentBytes int

	// CatalogBudget is the estimated tokens (characters / 4) of tool
	// signatures that Instructions inlines; the tools that do not fit are
	// found with tools.$codemode.search. Zero means 2,000; a negative value
	// inlines none, so the instructions list only the namespaces and send
	// the model to search (for a catalog that changes, or one too large
	// for a sample to help).
	CatalogBudget int

	// CacheDir keeps the engine's compiled code on disk so a new process
	// starts in milliseconds instead of hundreds. Empty means compile in
	// memory, once per process. That code runs as machine code, so New
	// refuses (on Unix) a directory, or anything in it, that another user
	// owns or group or others can write, and loads only code signed with
	// HMAC-SHA256 under the per-user key in the file cache.key of
	// $CODEMODE_CONFIG_DIR (default os.UserConfigDir()/codemode), made on
	// first use with mode 0600; unsigned or changed code is removed and
	// compiled afresh. Without a configuration directory for the key,
	// CacheDir is not used.
	CacheDir string

	// EngineWasm is the QuickJS-NG engine binary to use instead of the
	// one built into every build; it must be the pinned build (New fails
	// with ErrEngineMismatch otherwise). Nil means the file
	// $CODEMODE_ENGINE_WASM names when that is set, else the built-in
	// copy. Nothing is fetched or installed either way.
	EngineWasm []byte

	// TracerProvider, when set, traces every run: a span
	// "codemode.execute" from Execute's start to its return, under the
	// span in Execute's ctx if any, with a child "codemode.tool_call" per
	// call that started. A tool's Run (and the hooks) get the call span's
	// context, so the tool's own spans nest under it. Every span has
	// ended when Execute returns; a run refused with ErrClosed has none.
	// Nil (the default) means no spans.
	TracerProvider trace.TracerProvider

	// MeterProvider, when set, records the metrics codemode.runs,
	// codemode.run.duration, codemode.runs.active, codemode.tool_calls
	// and codemode.tool_call.duration; their attributes are bounded sets
	// (outcomes, diagnostic kinds, tool names). Nil (the default) means
	// no metrics.
	MeterProvider metric.MeterProvider

	// StateKey authenticates the states of suspended runs (see
	// [Runtime.ExecuteSuspendable]) with HMAC-SHA256: Resume refuses a
	// state not made with this key or one of PreviousStateKeys. It must be
	// at least 32 bytes, secret, and the same in every process that
	// resumes the runs. Nil means runs cannot suspend.
	StateKey []byte

	// PreviousStateKeys are keys states were sealed with before StateKey
	// replaced them: Resume and Inspect still accept those states (new
	// ones are sealed with StateKey). To rotate, put the new key in
	// StateKey and the old one here, and drop it once the runs it sealed
	// have ended. Each must be at least 32 bytes.
	PreviousStateKeys [][]byte

	// MaxStateBytes bounds the state of a suspended run (see
	// [Runtime.ExecuteSuspendable]). A run whose state would be larger
	// does not suspend: it fails with MemoryLimitExceeded as soon as that
	// is known, without writing the rest. Resume and Inspect refuse a
	// larger state (ErrStateInvalid) before reading any of it. The cap is
	// the Runtime's, whichever Runtime started the run. Zero means
	// MaxMemoryBytes: a state holds what the run has in memory, compressed
	// (to a third or a half, typically), so the default refuses only a
	// run that fills its memory with data that does not compress, and a
	// host sizing its store can count on a state being no larger than the
	// memory a run may use. It must not be negative.
	MaxStateBytes int64

	// TimeoutIncludesSuspended makes the wall time a run spends suspended
	// count against its Timeout, and move its timers and performance.now()
	// on by as much: a run resumed after its deadline ends with
	// TimeoutExceeded, and timers due while it was away fire, in order,
	// before the results delivered with it. False (the default) counts only
	// the time the run spends running, as if the tool calls it waited for
	// had answered at once. A run keeps the setting it started with.
	TimeoutIncludesSuspended bool

	// TraceData puts what runs handle on their spans: the program text,
	// each call's input and output, the result's value and the failure
	// messages, each cut at MaxTraceDataBytes. False (the default) keeps spans to names, sizes, counts
	// and outcomes, because these values are the users' data (and may
	// hold secrets), and trace backends are seldom cleared to keep it.
	TraceData bool
}

// Outcome says how a tool call ended.
type Outcome string

// The outcomes of a tool call.
const (
	// OutcomeOK: the tool returned plain data.
	OutcomeOK Outcome = "ok"
	// OutcomeError: the tool failed.
	OutcomeError Outcome = "error"
	// OutcomeInvalidOutput: the tool returned something that is not plain
	// data.
	OutcomeInvalidOutput Outcome = "invalid-output"
	// OutcomeCancelled: the run ended, or the call lost a Promise.race,
	// first.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeDenied: the host's policy (or the person it asked) refused
	// the call; it never ran.
	OutcomeDenied Outcome = "denied"
	// OutcomePending: the call waits for its result in a suspended run
	// (see Runtime.ExecuteSuspendable); only a suspended run's audit has
	// it.
	OutcomePending Outcome = "pending"
)

// The preset limits for untrusted programs (written by a model), sized for
// a model's context: long enough for a dozen sequential remote calls, few
// enough calls that a runaway loop ends quickly, and a result that fits a
// context window comfortably (about 5,000 tokens). codemode run and
// codemode mcp start from them; see [Options.WithUntrustedLimits].
const (
	UntrustedTimeout        = 30 * time.Second
	UntrustedMaxToolCalls   = 100
	UntrustedMaxOutputBytes = 20_000
)

// WithUntrustedLimits returns o with Timeout, MaxToolCalls and
// MaxOutputBytes set to the untrusted preset where they are zero. The zero
// Options keep meaning "no limit": a host opts in.
func (o Options) WithUntrustedLimits() Options {
	if o.Timeout == 0 {
		o.Timeout = UntrustedTimeout
	}
	if o.MaxToolCalls == 0 {
		o.MaxToolCalls = UntrustedMaxToolCalls
	}
	if o.MaxOutputBytes == 0 {
		o.MaxOutputBytes = UntrustedMaxOutputBytes
	}
	return o
}

// MinStateKeyBytes is the shortest Options.StateKey accepted.
const MinStateKeyBytes = 32

// Defaults for zero Options fields.
const (
	DefaultMaxAskInputBytes  = 8 << 10
	DefaultCompensationGrace = 5 * time.Second

	DefaultMaxMemoryBytes = 64 << 20
	DefaultMaxConcurrency = 8
	DefaultCatalogBudget  = 2000
)

// ErrInvalidOptions wraps every error New returns for bad Options.
var ErrInvalidOptions = errors.New("codemode: invalid options")

func (o *Options) normalize() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	if o.Timeout < 0 {
		return bad("Timeout %v is negative", o.Timeout)
	}
	switch {
	case o.MaxMemoryBytes == 0:
		o.MaxMemoryBytes = DefaultMaxMemoryBytes
	case o.MaxMemoryBytes < 1<<20 || o.MaxMemoryBytes > 2<<30:
		return bad("MaxMemoryBytes %d is outside 1 MiB..2 GiB", o.MaxMemoryBytes)
	}
	switch {
	case o.MaxConcurrency == 0:
		o.MaxConcurrency = DefaultMaxConcurrency
	case o.MaxConcurrency < 0:
		return bad("MaxConcurrency %d is negative", o.MaxConcurrency)
	}
	switch {
	case o.MaxStateBytes == 0:
		o.MaxStateBytes = o.MaxMemoryBytes
	case o.MaxStateBytes < 0:
		return bad("MaxStateBytes %d is negative", o.MaxStateBytes)
	}
	if o.StateKey != nil && len(o.StateKey) < MinStateKeyBytes {
		return bad("StateKey has %d bytes; it needs at least %d", len(o.StateKey), MinStateKeyBytes)
	}
	for i, k := range o.PreviousStateKeys {
		if len(k) < MinStateKeyBytes {
			return bad("PreviousStateKeys[%d] has %d bytes; it needs at least %d", i, len(k), MinStateKeyBytes)
		}
	}
	if o.MaxAskInputBytes < 0 || o.CompensationGrace < 0 {
		return bad("MaxAskInputBytes and CompensationGrace may not be negative")
	}
	if o.MaxAskInputBytes == 0 {
		o.MaxAskInputBytes = DefaultMaxAskInputBytes
	}
	if o.CompensationGrace == 0 {
		o.CompensationGrace = DefaultCompensationGrace
	}
	if o.CatalogBudget == 0 {
		o.CatalogBudget = DefaultCatalogBudget
	}
	switch {
	case o.MaxContentBytes == 0:
		o.MaxContentBytes = DefaultMaxContentBytes
	case o.MaxContentBytes < 0:
		return bad("MaxContentBytes %d is negative", o.MaxContentBytes)
	}
	return nil
}
