package codemode

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/codemode-go/codemode/internal/discovery"
	"github.com/codemode-go/codemode/internal/pattern"
)

// Verdict is a policy's answer for one tool call. The zero value is
// Unset, which grants nothing: a policy that returns it denies the call.
type Verdict int

// The verdicts.
const (
	// Unset is no verdict. A policy that returns it (say, a forgotten
	// Decision{}) denies the call; in Rules, a class left Unset takes
	// Default's verdict, and an Unset Default denies.
	Unset Verdict = iota
	// Allow: the call runs.
	Allow
	// Deny: the call does not run; the program gets a ToolError (kind
	// ToolFailure) with the decision's reason, which it can catch.
	Deny
	// Ask: someone decides. In a suspendable run the call waits as a
	// pending call with the decision's reason, for as long as the decision
	// takes (see Runtime.ExecuteSuspendable); in Execute, Options.Approve
	// decides while the run waits.
	Ask
	// Hold: nobody is asked, the host makes the call itself between
	// steps. In a suspendable run the call waits as a pending call with
	// no reason, for the host to make with Runtime.RunPending — after
	// recording the run's state, say, which is how a durable host makes
	// sure a call that must not happen twice is made once. In Execute it
	// runs as Allow. Rules never hold.
	Hold
)

func (v Verdict) String() string {
	switch v {
	case Unset:
		return "unset"
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	case Ask:
		return "ask"
	case Hold:
		return "hold"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// strictness orders verdicts from the one that grants most to the one
// that grants least: Allow, Ask, Deny (and anything else, which denies).
func (v Verdict) strictness() int {
	switch v {
	case Allow, Hold:
		return 0
	case Ask:
		return 1
	}
	return 2
}

// stricter returns whichever of a and b grants less.
func stricter(a, b Verdict) Verdict {
	if b.strictness() > a.strictness() {
		return b
	}
	return a
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
	// By names who answered a question (a person, a client), for the
	// record a host keeps of its answers; a policy's own verdicts leave
	// it empty.
	By string
}

type sessionKey struct{}

// WithSession returns a context that names the session a run belongs to:
// its cells, its stored values, and Call.Session, which policies see.
func WithSession(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, sessionKey{}, id)
}

func sessionOf(ctx context.Context) string {
	s, _ := ctx.Value(sessionKey{}).(string)
	return s
}

// SessionFrom returns the session WithSession put in ctx, with ok false
// when there is none: what a host that runs programs elsewhere (another
// process, another machine) passes on with each run.
func SessionFrom(ctx context.Context) (session string, ok bool) {
	s, ok := ctx.Value(sessionKey{}).(string)
	return s, ok
}

// Rules are a policy declared rather than written: a verdict by what a
// tool's annotations say, with exceptions by name.
// Rules{ReadOnly: Allow, Destructive: Deny, Default: Ask} runs reads,
// refuses deletions and asks about everything else.
//
// The order, for one call:
//  1. The Tools patterns that match the call's path. Among them, those
//     no other matching pattern is strictly more specific than decide
//     (a name without wildcards is more specific than "orders.*", which
//     is more specific than "*.*"); when several decide, the strictest
//     verdict wins: Deny over Ask over Allow. So "shop.*": Deny with
//     "*.get*": Allow denies shop.getCustomer (neither pattern covers the
//     other), while "shop.get*": Allow would allow it.
//  2. Else the tool's class: Destructive for tools annotated destructive,
//     ReadOnly for tools annotated read-only (a tool that claims both is
//     judged by the stricter of the two), Default for every other tool.
//     A class left Unset takes Default's verdict.
//  3. An Unset Default denies: the zero Rules deny every call.
type Rules struct {
	// ReadOnly applies to tools annotated read-only; Unset means Default.
	ReadOnly Verdict
	// Destructive applies to tools annotated destructive; Unset means
	// Default.
	Destructive Verdict
	// Default applies to every tool no other rule decides; Unset denies.
	Default Verdict
	// Tools overrides by tool name. A key is a pattern written as a call
	// site is, without "tools.": "orders.refund", "orders.*", "*.get*",
	// or files["v1.get"] for a segment that holds a dot. '*' matches any
	// run of characters within one segment (a tool name is one segment
	// whatever it contains, slashes and dots included), '?' one
	// character. A key that is not a valid pattern, or a verdict that is
	// Unset, denies every call, so that a typo never grants anything.
	Tools map[string]Verdict
	// Reason is given with Deny and Ask; empty means a sentence naming the
	// tool.
	Reason string
}

type toolRule struct {
	p pattern.Pattern
	v Verdict
}

// Policy returns the rules as an Options.Policy.
func (r Rules) Policy() func(context.Context, Call) Decision {
	var rules []toolRule
	broken := ""
	for k, v := range r.Tools {
		p, err := pattern.Parse(k)
		if err != nil || v == Unset {
			broken = k
			continue
		}
		rules = append(rules, toolRule{p, v})
	}
	return func(_ context.Context, c Call) Decision {
		v := r.verdict(rules, c)
		if broken != "" {
			v = Deny
		}
		reason := r.Reason
		switch {
		case broken != "":
			reason = fmt.Sprintf("the host's rule %q is not valid, so every call is denied", broken)
		case reason != "":
		case v == Deny:
			reason = c.Name + " is not allowed here"
		case v == Ask:
			reason = "allow " + c.Name + "?"
		}
		return Decision{Verdict: v, Reason: reason}
	}
}

// verdict applies the order documented on Rules.
func (r Rules) verdict(rules []toolRule, c Call) Verdict {
	path := c.Path
	if path == nil {
		path = strings.Split(c.Name, ".")
	}
	var matched []toolRule
	for _, tr := range rules {
		if tr.p.Match(path) {
			matched = append(matched, tr)
		}
	}
	if len(matched) > 0 {
		v := Allow
		for _, m := range matched {
			overridden := slices.ContainsFunc(matched, func(o toolRule) bool { return o.p.MoreSpecific(m.p) })
			if !overridden {
				v = stricter(v, m.v)
			}
		}
		return v
	}
	class := func(v Verdict) Verdict {
		if v == Unset {
			return r.Default
		}
		return v
	}
	v := r.Default
	switch a := c.Annotations; {
	case a != nil && a.ReadOnly && a.Destructive:
		v = stricter(class(r.ReadOnly), class(r.Destructive))
	case a != nil && a.Destructive:
		v = class(r.Destructive)
	case a != nil && a.ReadOnly:
		v = class(r.ReadOnly)
	}
	if v == Unset {
		return Deny
	}
	return v
}

// Unmatched returns the Tools patterns that match none of rt's tools, in
// order: most likely a typo, or a namespace whose server is not there.
func (r Rules) Unmatched(rt *Runtime) []string {
	var out []string
	for k := range r.Tools {
		p, err := pattern.Parse(k)
		if err == nil && slices.ContainsFunc(rt.tools, func(e *toolEntry) bool { return p.Match(e.path) }) {
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The classes ParseRules reads.
var ruleClasses = []string{"readonly", "destructive", "default"}

// ParseRules reads rules written as "readonly=allow,destructive=deny,
// default=ask,orders.refund=ask": the classes readonly, destructive and
// default by name, and tool patterns (see Rules.Tools), which always have
// a namespace. A word that is neither (a misspelt class), a pattern given
// twice, and a verdict other than allow, deny or ask are errors. Classes
// not given take default's verdict; without default, they deny.
func ParseRules(s string) (Rules, error) {
	var r Rules
	seen := map[string]bool{}
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
		k = strings.TrimSpace(k)
		if seen[k] {
			return Rules{}, fmt.Errorf("codemode: rule %q: %s is given twice", part, k)
		}
		seen[k] = true
		switch k {
		case "readonly":
			r.ReadOnly = verdict
		case "destructive":
			r.Destructive = verdict
		case "default":
			r.Default = verdict
		default:
			p, err := pattern.Parse(k)
			if err != nil {
				return Rules{}, fmt.Errorf("codemode: rule %q: %w", part, err)
			}
			if p.Segments() < 2 {
				return Rules{}, fmt.Errorf("codemode: rule %q: %q is not a class (%s) nor a tool pattern, which has a namespace (orders.refund, orders.*)%s",
					part, k, strings.Join(ruleClasses, ", "), didYouMean(k, ruleClasses))
			}
			if r.Tools == nil {
				r.Tools = map[string]Verdict{}
			}
			r.Tools[k] = verdict
		}
	}
	return r, nil
}

// didYouMean suggests the word of words nearest to w, when one is near.
func didYouMean(w string, words []string) string {
	paths := make([][]string, len(words))
	for i, c := range words {
		paths[i] = []string{c}
	}
	if near := discovery.Suggest(strings.ToLower(w), paths, 1); len(near) > 0 {
		return "; did you mean " + words[near[0]] + "?"
	}
	return ""
}
