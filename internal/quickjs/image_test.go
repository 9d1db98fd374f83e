package quickjs

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// captureImage makes an instance with cfg on e, runs setup in it and
// captures it.
func captureImage(t testing.TB, e *Engine, cfg InstanceConfig, setup string) *Image {
	t.Helper()
	in, err := e.NewInstance(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if setup != "" {
		if _, err := evalString(t, in, setup); err != nil {
			t.Fatal(err)
		}
	}
	img, err := in.Capture()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(img.Close)
	return img
}

func captureTest(t testing.TB, e *Engine, setup string) *Image {
	t.Helper()
	return captureImage(t, e, InstanceConfig{}, setup)
}

func fromImage(t testing.TB, img *Image) *Instance {
	t.Helper()
	in, err := img.NewInstance(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in
}

// TestImageStartsWhereCaptured: instances from an image see what the
// captured one had set up, both when freshly made and when reused.
func TestImageStartsWhereCaptured(t *testing.T) {
	e := newTestEngine(t, Config{})
	img := captureTest(t, e, `globalThis.greeting = "hello"; globalThis.list = [1, 2, 3]; 0`)
	for i := 0; i < 6; i++ {
		in := fromImage(t, img)
		got, err := evalString(t, in, `greeting + " " + list.map(x => x * 2).join()`)
		if err != nil || got != "hello 2,4,6" {
			t.Fatalf("run %d: got %q, %v", i, got, err)
		}
		in.Close()
	}
}

// TestImageIsolation: whatever one instance writes — globals,
// prototypes, a large heap — the next instance from the image never sees.
func TestImageIsolation(t *testing.T) {
	e := newTestEngine(t, Config{})
	img := captureTest(t, e, `globalThis.shared = { n: 0 }; 0`)
	scribbles := []string{
		`shared.n = 42; globalThis.leak = "secret-1"; 0`,
		`Object.prototype.leak = "secret-2"; Array.prototype.push = null; 0`,
		`globalThis.big = "secret-3".repeat(20000); 0`,
		`delete globalThis.shared; Math.random = () => 4; 0`,
		`JSON.parse = () => "secret-4"; String.prototype.trim = undefined; 0`,
		`(function r(n) { return n ? r(n - 1) + 1 : 0 })(400)`, // a deep stack
	}
	check := `[typeof leak, shared.n, typeof Array.prototype.push, JSON.parse("1"), typeof "".trim, typeof big, Math.random() < 1].join()`
	for i, s := range scribbles {
		in := fromImage(t, img)
		if _, err := evalString(t, in, s); err != nil {
			t.Fatalf("scribble %d: %v", i, err)
		}
		in.Close()
		next := fromImage(t, img)
		got, err := evalString(t, next, check)
		if err != nil || got != "undefined,0,function,1,function,undefined,true" {
			t.Errorf("after scribble %d: got %q, %v", i, got, err)
		}
		next.Close()
	}
}

// TestImageReusesInstances: a finished instance that did not grow is reset
// and handed out again; one that grew its memory or was killed is not.
func TestImageReusesInstances(t *testing.T) {
	e := newTestEngine(t, Config{})
	img := captureTest(t, e, "")
	a := fromImage(t, img)
	mod := a.mod
	a.Close()
	b := fromImage(t, img)
	if b.mod != mod {
		t.Fatal("a clean instance was not reused")
	}
	if _, err := evalString(t, b, `globalThis.x = "y".repeat(8 << 20); 0`); err != nil {
		t.Fatal(err)
	}
	b.Close()
	c := fromImage(t, img)
	if c.mod == mod {
		t.Fatal("an instance that grew its memory was reused")
	}
	if got, _ := evalString(t, c, `typeof x`); got != "undefined" {
		t.Fatalf("got %q", got)
	}
	c.Kill()
	cmod := c.mod
	c.Close()
	d := fromImage(t, img)
	if d.mod == cmod {
		t.Fatal("a killed instance was reused")
	}
	d.Close()
	// A stale handle changes nothing in the instance that reused its module.
	e1 := fromImage(t, img)
	e1.Close()
	e2 := fromImage(t, img)
	e1.Kill()
	if got, err := evalString(t, e2, `1 + 1`); err != nil || got != "2" {
		t.Fatalf("a stale Kill reached the new instance: %q, %v", got, err)
	}
	if _, err := evalString(t, e1, `1`); !errors.Is(err, ErrDead) && !errors.Is(err, ErrInterrupted) {
		t.Fatalf("a closed handle still runs: %v", err)
	}
	e2.Close()
}

// TestImageRandomAndClock: every instance from an image has its own
// Math.random sequence, and performance.now starts near where it stood.
func TestImageRandomAndClock(t *testing.T) {
	e := newTestEngine(t, Config{})
	img := captureTest(t, e, `Math.random(); performance.now(); 0`)
	seen := map[string]bool{}
	for i := 0; i < 8; i++ {
		in := fromImage(t, img)
		got, err := evalString(t, in, `[Math.random(), Math.random()].join()`)
		if err != nil {
			t.Fatal(err)
		}
		if seen[got] {
			t.Fatalf("Math.random repeated across instances of one image: %s", got)
		}
		seen[got] = true
		now, _ := evalString(t, in, `String(performance.now() < 60000)`)
		if now != "true" {
			t.Errorf("performance.now is not near its origin")
		}
		in.Close()
	}
}

// TestImageCapturePreconditions: a dead instance cannot be captured.
func TestImageCapturePreconditions(t *testing.T) {
	e := newTestEngine(t, Config{})
	in := newTestInstance(t, e, InstanceConfig{})
	in.Kill()
	_, _ = evalString(t, in, `for(;;){}`)
	if _, err := in.Capture(); !errors.Is(err, ErrNoImage) {
		t.Fatalf("got %v, want ErrNoImage", err)
	}
	other := newTestEngine(t, Config{Stop: StopNone})
	in2 := newTestInstance(t, other, InstanceConfig{})
	if _, err := in2.Capture(); !errors.Is(err, ErrNoImage) {
		t.Fatalf("got %v, want ErrNoImage without loop fuel", err)
	}
}

// TestImageConcurrent: many goroutines take and return instances of one
// image at once (run with -race).
func TestImageConcurrent(t *testing.T) {
	e := newTestEngine(t, Config{})
	img := captureTest(t, e, `globalThis.base = 10; 0`)
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 20; i++ {
				in, err := img.NewInstance(context.Background(), nil)
				if err != nil {
					errs <- err
					return
				}
				got, err := evalString(t, in, fmt.Sprintf(`globalThis.base += %d; base`, i))
				in.Close()
				if err != nil || got != fmt.Sprint(10+i) {
					errs <- fmt.Errorf("got %q, %v", got, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkInstance compares booting an instance with making one from an
// image: fresh (a new wasm instance) and reused (reset after a run).
func BenchmarkInstance(b *testing.B) {
	e := newTestEngine(b, Config{})
	b.Run("boot", func(b *testing.B) {
		for b.Loop() {
			in, err := e.NewInstance(context.Background(), InstanceConfig{})
			if err != nil {
				b.Fatal(err)
			}
			in.Close()
		}
	})
	img := captureTest(b, e, "")
	b.Run("image-fresh", func(b *testing.B) {
		for b.Loop() {
			in, err := img.clone(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			in.closeModule()
		}
	})
	b.Run("image-reused", func(b *testing.B) {
		for b.Loop() {
			in, err := img.NewInstance(context.Background(), nil)
			if err != nil {
				b.Fatal(err)
			}
			in.Close()
		}
	})
}
