package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

const versionHelp = `Usage: codemode version

Prints the module version the binary was built from ("(devel)" for a
build from a checkout, with its VCS revision when recorded) and the Go
version. MCP clients see the same version in codemode mcp's serverInfo.
`

func versionCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", versionHelp, stderr)
	rest, err := parseArgs(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(rest) != 0 {
		return usageFailed(stderr, "codemode version", "takes no arguments")
	}
	fmt.Fprintf(stdout, "codemode %s %s\n", version(), runtime.Version())
	return exitOK
}

// version is the version of this build, from its build information.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	return versionOf(bi)
}

// versionOf is the module version a binary was built from: a release
// ("v0.4.0") or a pseudo-version ("v0.0.0-20261201…-5bdd4245abcd",
// go install at a commit, or go build in a checkout since Go 1.24) as it
// is; otherwise "(devel)", followed by the VCS revision when the build
// recorded one, and "+dirty" when the checkout had changes.
func versionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	out := "(devel)"
	if rev != "" {
		out += " " + rev[:min(len(rev), 12)]
		if dirty {
			out += "+dirty"
		}
	}
	return out
}
