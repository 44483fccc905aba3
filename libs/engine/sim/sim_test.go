package sim

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"switchyard.dev/libs/engine/executor"
)

func TestPolynomial(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		b    executor.Batch
		want float64 // ms
	}{
		{"idle", executor.Batch{}, 0},
		{"prefill 1000", executor.Batch{PrefillTokens: 1000}, 1.25 + 74.1 + 26.2},
		{"decode empty", executor.Batch{DecodeTokens: 3, TotalBlocks: 10}, 5.74},
		{"decode full", executor.Batch{DecodeTokens: 3, UsedBlocks: 10, TotalBlocks: 10}, 5.74 + 54.01 - 25.74},
		{"mixed", executor.Batch{PrefillTokens: 100, DecodeTokens: 1, UsedBlocks: 5, TotalBlocks: 10}, PrefillMS(100) + DecodeMS(0.5)},
	}
	for _, tc := range tests {
		got := Polynomial{}.StepTime(&tc.b)
		if math.Abs(got.Seconds()*1000-tc.want) > 1e-6 {
			t.Errorf("%s: %v, want %vms", tc.name, got, tc.want)
		}
	}
	for u := 0.0; u < 1; u += 0.05 {
		if DecodeMS(u+0.05) <= DecodeMS(u) {
			t.Fatalf("decode time must grow with KV usage at %v", u)
		}
	}
}

func TestProfile(t *testing.T) {
	t.Parallel()
	p, err := ParseProfile([]byte(`{"prefill":[{"x":1000,"ms":100},{"x":0,"ms":10}],"decode":[{"x":0.5,"ms":20}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		b    executor.Batch
		want time.Duration
	}{
		{executor.Batch{PrefillTokens: 500}, 55 * time.Millisecond},
		{executor.Batch{PrefillTokens: 2000}, 190 * time.Millisecond},
		{executor.Batch{DecodeTokens: 1, UsedBlocks: 1, TotalBlocks: 4}, 20 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := p.StepTime(&tc.b); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.b, got, tc.want)
		}
	}
	for _, bad := range []string{`{`, `{"prefill":[],"decode":[{"x":0,"ms":1}]}`, `{"prefill":[{"x":0,"ms":-1}],"decode":[{"x":0,"ms":1}]}`} {
		if _, err := ParseProfile([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if _, err := LoadProfile("/nonexistent/profile.json"); err == nil {
		t.Error("missing file accepted")
	}
}

func FuzzParseProfile(f *testing.F) {
	f.Add([]byte(`{"prefill":[{"x":1,"ms":2}],"decode":[{"x":0,"ms":1},{"x":1,"ms":3}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		if err != nil {
			return
		}
		for _, n := range []int{0, 1, 100, 1 << 20} {
			if d := p.StepTime(&executor.Batch{PrefillTokens: n, DecodeTokens: 1, UsedBlocks: 1, TotalBlocks: 2}); d < 0 {
				t.Fatalf("negative step time %v", d)
			}
		}
	})
}

func TestSpeedUpAndTokens(t *testing.T) {
	t.Parallel()
	var slept []time.Duration
	fake := func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	e, err := New(Config{SpeedUp: 10, Sleep: fake, Now: time.Now, VocabSize: 300})
	if err != nil {
		t.Fatal(err)
	}
	b := &executor.Batch{PrefillTokens: 1000, Items: []executor.Item{{Seed: 5, End: 10, Sample: true}, {Seed: 5, End: 10}}}
	if err := e.Execute(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	if len(slept) != 1 || slept[0] != time.Duration(101.55*float64(time.Millisecond)/10) {
		t.Fatalf("slept %v", slept)
	}
	first := b.Items[0].Out
	if first < 3 || first >= 300 || b.Items[1].Out != 0 {
		t.Fatalf("tokens %d %d", first, b.Items[1].Out)
	}
	_ = e.Execute(t.Context(), b)
	if b.Items[0].Out != first {
		t.Fatal("tokens must be a pure function of seed and position")
	}
	inf, _ := New(Config{SpeedUp: math.Inf(1)})
	if inf.StepTime(b) != 0 {
		t.Fatal("infinite speed-up must take no time")
	}
	if _, err := New(Config{SpeedUp: -1}); err == nil {
		t.Fatal("negative speed-up accepted")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := sleep(ctx, time.Hour); err == nil {
		t.Fatal("sleep ignored cancellation")
	}
}

// fakeClock is a clock whose sleeps overrun by late, as a host timer does.
type fakeClock struct {
	now   time.Time
	late  time.Duration
	slept []time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.slept = append(c.slept, d)
	c.now = c.now.Add(d + c.late)
	return nil
}

func TestStepsKeepTheModelsClock(t *testing.T) {
	t.Parallel()
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	// A decode-only step on an empty cache: 5.74 ms of model time.
	decode := &executor.Batch{DecodeTokens: 1, TotalBlocks: 10, Items: []executor.Item{{Sample: true, End: 1}}}
	step := ms(5.74)
	tests := []struct {
		name      string
		late, gap time.Duration // the timer's overrun; the engine's time between steps
		steps     int
		want      []time.Duration // sleeps asked for
	}{
		{"exact timer", 0, ms(0.1), 3, []time.Duration{step, step, step}},
		{"late timer, back-to-back steps repay it", ms(0.5), ms(0.1), 3, []time.Duration{step, step - ms(0.5), step - ms(0.5)}},
		{"engine idled between steps: nothing owed", ms(0.5), maxCarryGap + time.Microsecond, 3, []time.Duration{step, step, step}},
		// 8 ms late after step 1: step 2 owes 8 ms, sleeps nothing and
		// still owes 8-5.74; step 3 sleeps the rest of its time.
		{"debt larger than a step carries over", ms(8), 0, 3, []time.Duration{step, step - (ms(8) - step)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{now: time.Unix(1000, 0), late: tc.late}
			e, err := New(Config{Sleep: c.Sleep, Now: c.Now, VocabSize: 300, SpeedUp: 1})
			if err != nil {
				t.Fatal(err)
			}
			start := c.now
			for i := range tc.steps {
				if i > 0 {
					c.now = c.now.Add(tc.gap)
				}
				if err := e.Execute(t.Context(), decode); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(c.slept, tc.want) {
				t.Fatalf("sleeps %v, want %v", c.slept, tc.want)
			}
			if tc.gap <= maxCarryGap {
				// Back to back: the whole run lasts the model's time, the
				// engine's gaps and one (the last) oversleep, whatever the
				// timer did before.
				want := time.Duration(tc.steps)*step + time.Duration(tc.steps-1)*tc.gap + tc.late
				if got := c.now.Sub(start); got != want {
					t.Fatalf("run took %v, want %v", got, want)
				}
			}
		})
	}
}

func TestStepCancelledOwesNothing(t *testing.T) {
	t.Parallel()
	c := &fakeClock{now: time.Unix(1000, 0), late: time.Millisecond}
	e, err := New(Config{Sleep: c.Sleep, Now: c.Now, VocabSize: 300, SpeedUp: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := &executor.Batch{PrefillTokens: 10}
	if err := e.Execute(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := e.Execute(ctx, b); err == nil {
		t.Fatal("a cancelled step must fail")
	}
	if err := e.Execute(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	full := e.StepTime(b)
	if last := c.slept[len(c.slept)-1]; last != full {
		t.Fatalf("after a cancelled step the next one slept %v, want the full %v", last, full)
	}
	if _, err := New(Config{Sleep: c.Sleep}); err == nil {
		t.Fatal("a fake Sleep without Now was accepted")
	}
}
