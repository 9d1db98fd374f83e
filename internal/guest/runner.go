package guest

import (
	"context"
	"time"

	"github.com/codemode-go/codemode/internal/sandbox"
)

// Runner runs prepared programs, each in an instance of its own, against
// the host's binding namespaces (sandbox.Request says what a run is
// given, sandbox.Result what it gives back). internal/sandbox is the
// JavaScript runner.
type Runner interface {
	// Run runs one program. Program failures are in the Result; the
	// error is for a run that could not start. A Runner that is not a
	// Suspender must not be given a Request with Suspend set.
	Run(ctx context.Context, req sandbox.Request) (sandbox.Result, error)
}

// Suspender is a Runner that can suspend runs: given a Request with
// Suspend set, Run stops a run that waits only for held calls and returns
// its state as bytes, and Resume continues it from them, in this process
// or another with the same engine. Callers check for it with a type
// assertion; a runner whose engine cannot write its state down does not
// implement it.
type Suspender interface {
	Runner
	// Resume continues a suspended run with results of its held calls.
	// away is how much time the run counts as having passed while it was
	// suspended.
	Resume(ctx context.Context, req sandbox.Request, state sandbox.State, results []sandbox.Delivery, away time.Duration) (sandbox.Result, error)
	// ImageSum identifies what a state of a run with memory bytes and
	// these bindings is taken against: a state resumes only on a
	// Suspender that gives the same sum for the same memory and bindings.
	ImageSum(memory uint64, bindings []sandbox.Namespace) (string, error)
}
