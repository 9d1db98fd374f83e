package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
)

// TestStepsWarmAndReplayed: runs on one Runtime step through their
// states at once, each resume either taking the instance that wrote the
// state (kept warm) or decoding it, and each state opened either from
// the Runtime's copy of it or through its MAC. A state resumed a second
// time (a replay) must behave as the first resume did, and every run
// must end with its own data: no run is handed another's instance.
func TestStepsWarmAndReplayed(t *testing.T) {
	get := Tool{Run: func(_ context.Context, in json.RawMessage) (any, error) { return in, nil }}
	rt := mustNew(t, Options{Tools: Tools{"x": Tools{"get": get}}, StateKey: testStateKey})
	ctx := context.Background()
	const steps = 6
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 6 {
		wg.Go(func() {
			code := fmt.Sprintf(`const keep = Array.from({ length: 3000 }, (_, i) => ({ i, s: "run %d item " + i }))
let sum = 0
for (let k = 0; k < %d; k++) { const r = await tools.x.get({ k, g: %d }); sum += r.k + keep[2999 - k].i }
return { sum, g: %d, last: keep[2999].s }`, g, steps, g, g)
			_, s, err := rt.ExecuteSuspendable(ctx, code)
			for k := 0; err == nil && s != nil; k++ {
				p := s.Pending[0]
				result := CallResult{Index: p.Index, Output: p.Input}
				replayed := k%2 == 1 // replay this state first: the next step must be the same
				var first Result
				var again *Suspended
				if replayed {
					var err2 error
					if first, again, err2 = rt.Resume(ctx, s.State, result); err2 != nil {
						errs <- fmt.Errorf("run %d step %d replayed: %v", g, k, err2)
						return
					}
				}
				var res Result
				res, s, err = rt.Resume(ctx, s.State, result)
				if replayed && ((s == nil) != (again == nil) ||
					s != nil && string(s.Pending[0].Input) != string(again.Pending[0].Input) ||
					s == nil && string(res.Value) != string(first.Value)) {
					errs <- fmt.Errorf("run %d step %d: the replay and the resume differ", g, k)
					return
				}
				if s == nil && err == nil {
					want := fmt.Sprintf(`{"sum":%d,"g":%d,"last":"run %d item 2999"}`, steps*(steps-1)/2+steps*2999-steps*(steps-1)/2, g, g)
					if string(res.Value) != want {
						errs <- fmt.Errorf("run %d ended with %s, want %s", g, res.Value, want)
					}
					return
				}
			}
			if err != nil {
				errs <- fmt.Errorf("run %d: %v", g, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
