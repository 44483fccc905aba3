package canary

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"switchyard.dev/libs/mesh/discovery"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rollouts
		err  string
	}{
		{in: "", want: Rollouts{}},
		{in: "decode=0.4.0@0.1", want: Rollouts{"decode": {"0.4.0", 0.1}}},
		{in: "router=1.2.3-rc.1+g1@1,decode=0.4.0@0", want: Rollouts{"router": {"1.2.3-rc.1+g1", 1}, "decode": {"0.4.0", 0}}},
		{in: "decode", err: "want role=version@weight"},
		{in: "decode=0.4.0", err: "want role=version@weight"},
		{in: "decode=0.4.0@x", err: "weight"},
		{in: "decode=0.4.0@1.5", err: "want a number in [0, 1]"},
		{in: "decode=0.4.0@-0.1", err: "want a number in [0, 1]"},
		{in: "decode=0.4.0@NaN", err: "want a number in [0, 1]"},
		{in: "decode=@0.1", err: "version"},
		{in: "decode=a b@0.1", err: "version"},
		{in: "=0.4.0@0.1", err: "role"},
		{in: "decode=1@0.1,decode=2@0.2", err: "named twice"},
		{in: "decode=1@0.1,", err: "want role=version@weight"},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Parse(%q) = %v, want %v", tc.in, got, tc.want)
		}
		back, err := Parse(got.String())
		if err != nil || fmt.Sprint(back) != fmt.Sprint(got) {
			t.Errorf("round trip of %q: %v, %v", got.String(), back, err)
		}
	}
	many := make([]string, MaxRollouts+1)
	for i := range many {
		many[i] = fmt.Sprintf("r%d=1@0.1", i)
	}
	if _, err := Parse(strings.Join(many, ",")); err == nil {
		t.Errorf("Parse of %d rollouts: no error", len(many))
	}
}

func TestIsCanary(t *testing.T) {
	s, err := NewSplit(0.1)
	if err != nil {
		t.Fatal(err)
	}
	old := discovery.Instance{ID: "d0", Role: "decode", Version: "0.3.0"}
	newer := discovery.Instance{ID: "d1", Role: "decode", Version: "0.4.0"}
	tagged := discovery.Instance{ID: "d2", Role: "decode", Version: "0.3.0", Tags: []string{discovery.TagCanary}}
	router := discovery.Instance{ID: "r0", Role: "router", Version: "0.4.0"}
	check := func(when string, want map[string]bool) {
		t.Helper()
		for _, in := range []discovery.Instance{old, newer, tagged, router} {
			if got := s.IsCanary(in); got != want[in.ID] {
				t.Errorf("%s: IsCanary(%s) = %v, want %v", when, in.ID, got, want[in.ID])
			}
		}
	}
	check("no rollout", map[string]bool{"d2": true})
	if w := s.Weight("decode"); w != 0.1 {
		t.Errorf("tag weight = %v, want 0.1", w)
	}
	s.Set(Rollouts{"decode": {Version: "0.4.0", Weight: 0.3}})
	check("decode rollout", map[string]bool{"d1": true, "d2": true})
	if w := s.Weight("decode"); w != 0.3 {
		t.Errorf("rollout weight = %v, want 0.3", w)
	}
	if w := s.Weight("router"); w != 0.1 {
		t.Errorf("router weight = %v, want the tag weight 0.1", w)
	}
	if _, err := NewSplit(2); err == nil {
		t.Error("NewSplit(2): no error")
	}
}

// TestShareHolds: over 1,000 requests with distinct keys, the canary group
// gets the configured share within 2 points, whatever the replica counts,
// and the same key always lands in the same group.
func TestShareHolds(t *testing.T) {
	for _, weight := range []float64{0.01, 0.05, 0.1, 0.25, 0.5, 0.9} {
		for _, replicas := range [][2]int{{1, 1}, {1, 9}, {4, 4}, {9, 1}, {2, 30}} {
			s, _ := NewSplit(0)
			s.Set(Rollouts{"decode": {Version: "new", Weight: weight}})
			canaries, base := replicas[0], replicas[1]
			isCanary := func(i int) bool { return i < canaries }
			served := 0
			var buf []int
			for i := range 1000 {
				key := TokensKey([]uint32{1, uint32(i), uint32(i * 7)})
				group := s.Choose("decode", key, canaries+base, isCanary, buf)
				if len(group) == 0 {
					t.Fatal("empty group")
				}
				if isCanary(group[0]) {
					served++
				}
				again := s.Choose("decode", key, canaries+base, isCanary, nil)
				if isCanary(again[0]) != isCanary(group[0]) {
					t.Fatalf("key %d changed group", key)
				}
			}
			if got := float64(served) / 1000; math.Abs(got-weight) > 0.02 {
				t.Errorf("weight %v, %d canaries and %d baseline: canary share %.3f", weight, canaries, base, got)
			}
		}
	}
}

// TestRaisingWeightOnlyMovesToCanary: a key in the canary group stays
// there when the weight rises (cache locality survives a step).
func TestRaisingWeightOnlyMovesToCanary(t *testing.T) {
	for i := range 2000 {
		key := SessionKey(fmt.Sprint("session-", i))
		p := Point("decode", key)
		if p < 0 || p >= 1 {
			t.Fatalf("Point = %v", p)
		}
		low, high := p < 0.1, p < 0.25
		if low && !high {
			t.Fatalf("key %d in the canary at 0.1 but not at 0.25", key)
		}
	}
	if Point("decode", 42) == Point("router", 42) {
		t.Error("the split of two roles is not independent")
	}
}

func TestChooseFallsBack(t *testing.T) {
	s, _ := NewSplit(0)
	s.Set(Rollouts{"decode": {Version: "new", Weight: 1}})
	if g := s.Choose("decode", 7, 3, func(int) bool { return false }, nil); len(g) != 3 {
		t.Errorf("no canaries: group %v, want all three", g)
	}
	s.Set(Rollouts{"decode": {Version: "new", Weight: 0}})
	if g := s.Choose("decode", 7, 2, func(int) bool { return true }, nil); len(g) != 2 {
		t.Errorf("only canaries at weight 0: group %v, want both", g)
	}
}

func TestTokensKeyUsesLeadingTokens(t *testing.T) {
	a := make([]uint32, StickyTokens+10)
	b := make([]uint32, StickyTokens+20)
	for i := range a {
		a[i] = uint32(i)
	}
	copy(b, a)
	b[len(b)-1] = 99
	if TokensKey(a) != TokensKey(b) {
		t.Error("prompts sharing their first StickyTokens tokens key differently")
	}
	if TokensKey(a[:3]) == TokensKey(a[:4]) {
		t.Error("short prompts of different lengths key the same")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "decode=0.4.0@0.1", "a=b@1,c=d@0", "x=y@1e-3", "=@", "a=b@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := Parse(s)
		if err != nil {
			return
		}
		for role, r := range rs {
			if err := r.Validate(role); err != nil {
				t.Fatalf("Parse(%q) accepted %s: %v", s, role, err)
			}
		}
		back, err := Parse(rs.String())
		if err != nil || fmt.Sprint(back) != fmt.Sprint(rs) {
			t.Fatalf("round trip of %q: %v, %v", rs.String(), back, err)
		}
	})
}
