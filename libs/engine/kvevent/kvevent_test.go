package kvevent

import (
	"context"
	"errors"
	"testing"
	"time"
)

func ev(h uint64) []Event { return []Event{{Kind: Removed, BlockHashes: []uint64{h}}} }

func TestJournalSince(t *testing.T) {
	t.Parallel()
	j := NewJournal(3)
	if got := j.Append(nil); got != 0 {
		t.Fatalf("empty append numbered %d", got)
	}
	for i := uint64(1); i <= 5; i++ {
		if got := j.Append(ev(i)); got != i {
			t.Fatalf("append %d numbered %d", i, got)
		}
	}
	tests := []struct {
		after   uint64
		want    []uint64
		wantGap bool
	}{
		{after: 5, want: nil},
		{after: 4, want: []uint64{5}},
		{after: 2, want: []uint64{3, 4, 5}},
		{after: 1, wantGap: true},
		{after: 0, wantGap: true},
	}
	for _, tc := range tests {
		got, err := j.Since(tc.after)
		if tc.wantGap {
			if !errors.Is(err, ErrGap) {
				t.Errorf("Since(%d) err = %v, want ErrGap", tc.after, err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Fatalf("Since(%d) = %v, %v", tc.after, got, err)
		}
		for i, b := range got {
			if b.Seq != tc.want[i] {
				t.Errorf("Since(%d)[%d].Seq = %d, want %d", tc.after, i, b.Seq, tc.want[i])
			}
		}
	}
}

func TestSubscriptionWaits(t *testing.T) {
	t.Parallel()
	j := NewJournal(8)
	j.Append(ev(1))
	s := j.Subscribe(0)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	b, err := s.Next(ctx)
	if err != nil || b.Seq != 1 {
		t.Fatalf("first = %v, %v", b, err)
	}
	go func() { time.Sleep(10 * time.Millisecond); j.Append(ev(2)) }()
	b, err = s.Next(ctx)
	if err != nil || b.Seq != 2 {
		t.Fatalf("second = %v, %v", b, err)
	}
	short, cancel2 := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel2()
	if _, err := s.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle Next = %v", err)
	}
}

func TestSubscriptionGap(t *testing.T) {
	t.Parallel()
	j := NewJournal(2)
	s := j.Subscribe(0)
	for i := range uint64(4) {
		j.Append(ev(i))
	}
	if _, err := s.Next(t.Context()); !errors.Is(err, ErrGap) {
		t.Fatalf("err = %v, want ErrGap", err)
	}
	if Stored.String() != "stored" || Kind(9).String() != "kind(9)" {
		t.Fatal("kind names")
	}
}

// TestJournalAfterStart: a journal started after s numbers its first
// batch s+1, Subscribe(0) reads from its start, and a position from
// below its start (another run's) is a gap, not a resume.
func TestJournalAfterStart(t *testing.T) {
	t.Parallel()
	const start = 1 << 40
	j := NewJournalAfter(4, start)
	if got := j.Last(); got != start {
		t.Fatalf("Last before any batch = %d, want %d", got, start)
	}
	if got := j.Append(ev(1)); got != start+1 {
		t.Fatalf("first batch numbered %d, want %d", got, start+1)
	}
	j.Append(ev(2))
	all, err := j.Since(0)
	if err != nil || len(all) != 2 || all[0].Seq != start+1 {
		t.Fatalf("Since(0) = %v, %v; want both batches from %d", all, err, start+1)
	}
	for _, after := range []uint64{1, 17, start - 1} {
		if _, err := j.Since(after); !errors.Is(err, ErrGap) {
			t.Errorf("Since(%d) = %v, want ErrGap", after, err)
		}
	}
	for range 3 {
		j.Append(ev(3))
	}
	if _, err := j.Since(0); !errors.Is(err, ErrGap) {
		t.Errorf("Since(0) after the start was dropped = %v, want ErrGap", err)
	}
}

func TestRandomStart(t *testing.T) {
	t.Parallel()
	seen := map[uint64]bool{}
	for range 100 {
		s := RandomStart()
		if s == 0 || s >= 1<<62 {
			t.Fatalf("RandomStart() = %d, want in [1, 2^62)", s)
		}
		seen[s] = true
	}
	if len(seen) < 99 {
		t.Fatalf("100 starts gave %d distinct values", len(seen))
	}
}
