package sandbox

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Tool calls run on their own goroutines, never on the run's: a tool may
// block, and the run loop must keep its timers and its deadline. Starting
// a goroutine while another processor is idle wakes a thread, and on
// virtual machines that wakeup (a futex system call) costs about 5 µs,
// as much as the rest of an instant tool call together.
//
// So a goroutine that finished a call does not exit at once: it stays
// runnable for idleSpin, yielding its processor at every turn, and takes
// the next call handed to it without any wakeup. A program that awaits
// instant tools in a loop keeps one such worker warm. At most
// maxSpinners workers wait this way, and never more than the processors
// beyond the one the run itself needs, so an idle worker cannot crowd
// out runs.

// idleSpin is how long a worker waits for another call. It exceeds the
// few microseconds a program takes between two calls.
const idleSpin = 50 * time.Microsecond

const maxSpinners = 4

// pollsPerYield is how many times a waiting worker looks for a job
// between yields of its processor: a few hundred nanoseconds.
const pollsPerYield = 256

// quickJob is the longest job after which a worker waits for another.
const quickJob = 20 * time.Microsecond

const (
	spinFree    = iota // no worker in this place
	spinIdle           // a worker waits here for a call
	spinHanding        // goWork is storing a call for the waiting worker
	spinHanded         // the call is stored
)

type spinner struct {
	state atomic.Uint32
	job   func()   // written by goWork before state becomes spinHanded
	_     [48]byte // keep places on their own cache lines
}

var spinners [maxSpinners]spinner

// spinLimit is how many workers may wait at once. It is read once:
// runtime.GOMAXPROCS takes the scheduler's lock, which waiting workers
// contend for already.
var spinLimit = sync.OnceValue(func() int {
	return max(0, min(maxSpinners, runtime.GOMAXPROCS(0)-1))
})

// goWork runs job on another goroutine: a waiting worker if there is one
// (it reports true: the job runs on another processor already), else a
// new goroutine.
func goWork(job func()) (handed bool) {
	for i := range spinLimit() {
		s := &spinners[i]
		if s.state.CompareAndSwap(spinIdle, spinHanding) {
			s.job = job
			s.state.Store(spinHanded)
			return true
		}
	}
	go work(job)
	return false
}

// work runs job, then waits for more only when job was quick: a slow
// job says calls are not following each other closely, and a worker
// waiting on one processor delays the timers of the others.
func work(job func()) {
	for job != nil {
		start := time.Now()
		job()
		if time.Since(start) > quickJob {
			return
		}
		job = awaitJob()
	}
}

// awaitJob waits up to idleSpin for a job handed by goWork; nil when none
// came or when enough workers wait already.
func awaitJob() func() {
	for i := range spinLimit() {
		s := &spinners[i]
		if !s.state.CompareAndSwap(spinFree, spinIdle) {
			continue
		}
		until := time.Now().Add(idleSpin)
		for {
			// Poll a while between yields: a yield takes the
			// scheduler's lock, and the job should start at once.
			for range pollsPerYield {
				switch s.state.Load() {
				case spinHanded:
					j := s.job
					s.job = nil
					s.state.Store(spinFree)
					return j
				case spinHanding:
					runtime.Gosched() // goWork is storing it
				}
			}
			if !time.Now().Before(until) && s.state.CompareAndSwap(spinIdle, spinFree) {
				return nil
			}
			runtime.Gosched()
		}
	}
	return nil
}
