// Package cluster runs codemode programs across processes and machines on
// NATS JetStream: fronts submit runs and wait for their results, workers
// run them, and a run survives the worker that runs it.
//
// A [Node] joins the cluster: an embedded nats-server with JetStream (the
// default, for one machine: its data in a directory, listening on
// loopback behind a token) or an existing NATS (Config.URL). Submit
// publishes a job to a work queue and Wait returns its result on any
// front; a [Worker] takes jobs into free slots and runs each durably:
//
//   - a call the host's policy allows runs at once when its tool is
//     annotated read-only or idempotent, and may run again after a
//     takeover;
//   - any other call is held: the worker checkpoints the run's state in
//     its record (a compare-and-swap, so a worker that lost the run is
//     refused), claims the call in an effect ledger, makes it, and
//     records its result;
//   - a worker that takes over a run from one that stopped (it died, or
//     stalled past AckWait) resumes the last checkpoint: calls recorded
//     done get their recorded results, calls claimed but not recorded are
//     in doubt and are made again only for tools annotated idempotent
//     (with the same [IdempotencyKey]); the program is told the outcome
//     of any other is unknown. No such call is ever made twice.
//
// Around runs: cells ([Node.StartCell], [Node.WaitCell]) whose console
// lines reach any front once each; questions a policy asks park the run
// until any front answers ([Node.Answer]) or a deadline the servers
// schedule denies them; processes list themselves ([Node.Nodes]) and
// workers drain on request ([Node.Drain]); fronts publish the tools
// workers build ([Node.PublishManifest]); compensations of a rolled-back
// transaction go through the ledger too.
//
// The root package knows nothing of NATS: this package builds on its
// suspend and resume (Runtime.ExecuteSuspendable, Inspect, Resume,
// RunPending).
package cluster
