package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Verdict is a policy's answer for one tool call.
type Verdict int

// The verdicts.
const (
	// Allow: the call runs.
	Allow Verdict = iota
	// Deny: the call does not run; the program gets a ToolError (kind
	// ToolFailure) with the decision's reason, which it can catch.
	Deny
	// Ask: someone decides. In a suspendable run the call waits as a
	// pending call with the decision's reason, for as long as the decision
	// takes (see Runtime.ExecuteSuspendable); in Execute, Options.Approve
	// decides while the run waits.
	Ask
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	case Ask:
		return "ask"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// ParseVerdict reads "allow", "deny" or "ask".
func ParseVerdict(s string) (Verdict, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "allow":
		return Allow, nil
	case "deny":
		return Deny, nil
	case "ask":
		return Ask, nil
	}
	return 0, fmt.Errorf("codemode: %q is not a verdict (allow, deny or ask)", s)
}

// Decision is a policy's answer: a verdict and, for Deny and Ask, the
// reason (the denied program's ToolError message, or the question put to
// whoever decides).
type Decision struct {
	Verdict Verdict
	Reason  string
}

// CallRequest is what a policy sees of a call before it runs.
type CallRequest struct {
	// Name is the tool's dot-joined path, Path its segments.
	Name string
	Path []string
	// Input is the call's argument, as the program gave it (it has passed
	// the tool's input schema).
	Input json.RawMessage
	// Annotations are the tool's (nil when it has none).
	Annotations *Annotations
	// Index is the call's place in the run's audit (Result.ToolCalls).
	Index int
	// RunID names the run (Suspended.RunID for a suspendable run); Session
	// is the id the host gave the run's context with WithSession.
	RunID, Session string
	// Source is "codemode": the call comes from a program, not straight
	// from the model.
	Source string
}

// CallSource is CallRequest.Source.
const CallSource = "codemode"

type sessionKey struct{}

// WithSession returns a context that names the session a run belongs to:
// policies see it as CallRequest.Session.
func WithSession(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, sessionKey{}, id)
}

func sessionOf(ctx context.Context) string {
	s, _ := ctx.Value(sessionKey{}).(string)
	return s
}

// Rules are a policy declared rather than written: a verdict by what a
// tool's annotations say, with exceptions by name. Rules{ReadOnly: Allow,
// Destructive: Deny, Default: Ask} runs reads, refuses deletions and asks
// about everything else. Tools without annotations fall under Default.
type Rules struct {
	// ReadOnly applies to tools annotated read-only.
	ReadOnly Verdict
	// Destructive applies to tools annotated destructive.
	Destructive Verdict
	// Default applies to every other tool.
	Default Verdict
	// Tools overrides by tool name, matched with path.Match against the
	// dot-joined name ("orders.*", "admin.reset"). The most specific
	// match wins: a name without wildcards, else the longest pattern.
	Tools map[string]Verdict
	// Reason is given with Deny and Ask; empty means a sentence naming the
	// tool.
	Reason string
}

// Policy returns the rules as an Options.Policy.
func (r Rules) Policy() func(context.Context, CallRequest) Decision {
	patterns := make([]string, 0, len(r.Tools))
	for p := range r.Tools {
		patterns = append(patterns, p)
	}
	slices.SortFunc(patterns, func(a, b string) int {
		wa, wb := strings.ContainsAny(a, "*?["), strings.ContainsAny(b, "*?[")
		switch {
		case wa != wb && !wa:
			return -1
		case wa != wb:
			return 1
		case len(a) != len(b):
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return func(_ context.Context, c CallRequest) Decision {
		v := r.Default
		switch a := c.Annotations; {
		case a != nil && a.ReadOnly:
			v = r.ReadOnly
		case a != nil && a.Destructive:
			v = r.Destructive
		}
		for _, p := range patterns {
			if ok, _ := path.Match(p, c.Name); ok {
				v = r.Tools[p]
				break
			}
		}
		reason := r.Reason
		switch {
		case reason != "":
		case v == Deny:
			reason = c.Name + " is not allowed here"
		case v == Ask:
			reason = "allow " + c.Name + "?"
		}
		return Decision{Verdict: v, Reason: reason}
	}
}

// ParseRules reads rules written as "readonly=allow,destructive=deny,
// default=ask,orders.refund=ask": the three classes by name, anything
// else a tool-name pattern. Classes not given are Allow.
func ParseRules(s string) (Rules, error) {
	var r Rules
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return Rules{}, fmt.Errorf("codemode: rule %q is not NAME=VERDICT", part)
		}
		verdict, err := ParseVerdict(v)
		if err != nil {
			return Rules{}, err
		}
		switch k = strings.TrimSpace(k); k {
		case "readonly":
			r.ReadOnly = verdict
		case "destructive":
			r.Destructive = verdict
		case "default":
			r.Default = verdict
		default:
			if _, err := path.Match(k, ""); err != nil {
				return Rules{}, fmt.Errorf("codemode: rule %q: bad pattern: %v", part, err)
			}
			if r.Tools == nil {
				r.Tools = map[string]Verdict{}
			}
			r.Tools[k] = verdict
		}
	}
	return r, nil
}
