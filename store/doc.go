// Package store keeps what outlives a run behind small interfaces, so that
// where it is kept — this process's memory, a directory, a networked
// store — is a choice of implementation, not of design.
//
// [Runs] keeps the record of each suspended run: the step it is at, a
// digest of that step's state, and whether someone has taken the step to
// run it. Every change is a compare-and-swap on the record's revision, so
// of two processes that race to run the same step exactly one wins, and a
// state whose step was taken, or is older than the run's, is refused
// (codemode.Steps builds on this). [MemoryRuns] keeps records in memory,
// [DirRuns] in a directory shared by the processes of one machine.
//
// The interface is shaped for a key-value store with revisions (a
// JetStream KV bucket, etcd): records are read and written by key, a
// write names the revision it replaces, and nothing on a hot path lists
// keys.
package store
