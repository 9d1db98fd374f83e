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
// [Values] holds the JSON values programs keep for their session from one
// run to the next (tools.$codemode.store, load and keys), within quotas of
// keys and bytes per session, until the session ends and its values are
// dropped. Every implementation checks keys ([CheckKey]) and values
// ([MaxValueBytes]) itself, whoever calls it. A write to a key is
// last-writer-wins, and a session's quotas hold however writes
// interleave. [MemoryValues] keeps values in memory, [DirValues] in a
// directory shared by the processes of one machine.
//
// The interfaces are shaped for a key-value store with revisions (a
// JetStream KV bucket, etcd): records and values are read and written by
// key, and nothing on a hot path lists keys. A record's writer names the
// revision it replaces; a session's values have an index of their own,
// which lists the session's keys and sizes and which a write to the
// session replaces by compare-and-swap, so that its quotas hold across
// processes.
package store
