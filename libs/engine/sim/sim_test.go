package sim

import (
	"context"
	"math"
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
	e, err := New(Config{SpeedUp: 10, Sleep: fake, VocabSize: 300})
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
