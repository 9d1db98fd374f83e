// Package discovery is how a model finds tools it cannot see: the
// ranking behind tools.$codemode.search (BM25F over a tool's path,
// description and input, with a fallback for partial words and exact
// tool names first), the "did you mean" suggestions for an unknown tool,
// and the choice of which signatures the instructions inline within a
// token budget.
//
// It knows nothing of the runtime's types: the root package hands it
// paths and texts and maps the answers back. Its recall test runs on a
// committed fixture drawn from GitHub's REST API (testdata/README.md), so
// `go test ./...` guards the ranking without downloading a spec.
package discovery
