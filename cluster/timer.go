package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/codemode-go/codemode"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Deadlines of parked runs.
//
// A run that parks with questions schedules a message in CM_TIMERS (under
// cm.timer.at.<id>, one schedule per run: parking again replaces it) that
// the servers publish to cm.timer.due at the deadline. A worker takes it
// and, if the run is still parked at that step, denies its questions with
// Answer, whose compare-and-swap makes a late person's answer and the
// deadline exclusive: exactly one of them decides.

// due is the body of a deadline.
type due struct {
	ID   string `json:"id"`
	Step int    `json:"step"`
}

// deadline schedules the deadline of run id's questions at step.
func (w *Worker) deadline(ctx context.Context, id string, step int) {
	n := w.node
	m := nats.NewMsg("cm.timer.at." + id)
	m.Data = mustJSON(due{ID: id, Step: step})
	at := time.Now().Add(n.cfg.AnswerWithin)
	err := retry(context.WithoutCancel(ctx), func(ctx context.Context) error {
		_, err := n.js.PublishMsg(ctx, m, jetstream.WithScheduleAt(at), jetstream.WithScheduleTarget(dueSubject))
		return err
	})
	if err != nil {
		// The run stays parked until someone answers or its record
		// expires.
		w.log.Warn("scheduling the deadline of a parked run failed", "run", id, "step", step, "error", err)
	}
}

// expire denies the questions of a parked run past its deadline.
func (n *Node) expire(ctx context.Context, d due) {
	rec, _, err := n.record(ctx, d.ID)
	if err != nil || rec.Status != parked || rec.Step != d.Step {
		return // answered, cancelled, or gone
	}
	answers := make(map[int]codemode.Decision, len(rec.Questions))
	why := fmt.Sprintf("no one answered within %v", n.cfg.AnswerWithin)
	for _, q := range rec.Questions {
		answers[q.Index] = codemode.Decision{Verdict: codemode.Deny, Reason: why, By: "deadline"}
	}
	_ = n.Answer(ctx, d.ID, d.Step, answers)
}

// expireDue takes due deadlines until ctx ends.
func (w *Worker) expireDue(ctx context.Context) {
	cons, err := w.node.tmrs.Consumer(ctx, timers)
	if err != nil {
		w.log.Warn("the deadlines' consumer", "error", err)
		return
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var d due
		if json.Unmarshal(m.Data(), &d) == nil && d.ID != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			w.node.expire(ctx, d)
			cancel()
		}
		_ = m.Ack()
	})
	if err != nil {
		w.log.Warn("taking deadlines failed", "error", err)
		return
	}
	<-ctx.Done()
	cc.Stop()
}
