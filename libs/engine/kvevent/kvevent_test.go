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
