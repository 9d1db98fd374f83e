// Command codemode runs model-written JavaScript or TypeScript programs
// against tools, confined in a WebAssembly sandbox. Run `codemode help`.
package main

import (
	"os"

	"github.com/codemode-go/codemode/cmd/codemode/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
