//go:build !unix

package bench

import "os"

// peakRSS reports nothing where the system gives no peak resident set.
func peakRSS(*os.ProcessState) (int64, bool) { return 0, false }
