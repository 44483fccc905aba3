package mooncake

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func mustProfile(t testing.TB, s string) RateProfile {
	t.Helper()
	p, err := ParseRateProfile(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseRateProfile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"const:1", "const:1"},
		{"const:2.5", "const:2.5"},
		{"sin:10m,1,3", "sin:10m0s,1,3"},
		{"step:20m,3", "step:20m0s,3"},
		{"piecewise:0s=1,30s=4,1m=0", "piecewise:0s=1,30s=4,1m0s=0"},
		{"piecewise:5s=2", "piecewise:5s=2"},
		{"sin:10m,1,3*step:20m,3", "sin:10m0s,1,3*step:20m0s,3"},
		{" sin: 1h , 0.5 , 1.5 * const:-0 ", "sin:1h0m0s,0.5,1.5*const:0"},
		{"sin:1s,2,2", "sin:1s,2,2"},
		{"sin:24h,0.5,1.5*sin:1h,0.8,1.2", "sin:24h0m0s,0.5,1.5*sin:1h0m0s,0.8,1.2"},
		{"step:0s,1e6", "step:0s,1e+06"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			p := mustProfile(t, tt.in)
			if got := p.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			if q := mustProfile(t, p.String()); !reflect.DeepEqual(p, q) {
				t.Fatalf("reparse of %q differs: %+v vs %+v", p.String(), p, q)
			}
		})
	}
	if got := (RateProfile{}).String(); got != "const:1" {
		t.Errorf("zero value prints %q", got)
	}
}

func TestParseRateProfileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{"", "rate profile is empty"},
		{"  ", "rate profile is empty"},
		{"sin:10m,1,3*", `factor 2 "": empty factor`},
		{"cos:1s,1,2", `factor 1 "cos:1s,1,2": unknown kind "cos"`},
		{"2", `factor 1 "2": want KIND:ARGS`},
		{"const:-1", `multiplier "-1" is negative`},
		{"const:x", `multiplier "x" is not a number`},
		{"const:NaN", `multiplier "NaN" is not finite`},
		{"const:inf", `multiplier "inf" is not finite`},
		{"const:1e400", `multiplier "1e400" is not finite`},
		{"const:2e6", `multiplier "2e6" exceeds 1e+06`},
		{"const:1,2", "const takes one multiplier, got 2"},
		{"step:10s", "step takes AT,MULT, got 1"},
		{"step:-1s,2", `factor 1 "step:-1s,2": time "-1s" is negative`},
		{"step:10,2", `time "10": time: missing unit`},
		{"step:10s,-2", `multiplier "-2" is negative`},
		{"sin:0s,1,2", `period "0s" must be > 0`},
		{"sin:1m,3,1", "low multiplier 3 > high 1"},
		{"sin:1m,1", "sin takes PERIOD,LOW,HIGH, got 2"},
		{"piecewise:", `point 1 "": want TIME=MULT`},
		{"piecewise:0s=1,10s=2,10s=3", "point 3: time 10s is not after the previous point's 10s"},
		{"piecewise:20s=1,10s=2", "point 2: time 10s is not after"},
		{"piecewise:0s=1,5s=-2", `point 2: multiplier "-2" is negative`},
		{"const:1*const:1*const:1*const:1*const:1*const:1*const:1*const:1*const:1", "9 factors, at most 8"},
		{"sin:1s,0,1*sin:1.000000001s,0,1", "no common period"},
		{"sin:1ms,0,1*piecewise:0s=1,1000h=2", "integration cells"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			_, err := ParseRateProfile(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestMultiplier(t *testing.T) {
	t.Parallel()
	tests := []struct {
		profile string
		atMs    float64
		want    float64
	}{
		{"const:2", 123, 2},
		{"step:10s,3", 9999, 1},
		{"step:10s,3", 10000, 3},
		{"sin:1m,1,3", 0, 1},      // trough at the start
		{"sin:1m,1,3", 15000, 2},  // mean a quarter period in
		{"sin:1m,1,3", 30000, 3},  // peak at half a period
		{"sin:1m,1,3", 600000, 1}, // ten periods later, the trough again
		{"piecewise:10s=1,20s=3", 0, 1},
		{"piecewise:10s=1,20s=3", 15000, 2},
		{"piecewise:10s=1,20s=3", 20000, 3},
		{"piecewise:10s=1,20s=3", 1e9, 3},
		{"sin:1m,1,3*step:1m,2", 30000, 3},
		{"sin:1m,1,3*step:1m,2", 90000, 6},
	}
	for _, tt := range tests {
		got := mustProfile(t, tt.profile).Multiplier(tt.atMs)
		if math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s at %gms = %g, want %g", tt.profile, tt.atMs, got, tt.want)
		}
	}
	if m := (RateProfile{}).Multiplier(5); m != 1 {
		t.Errorf("zero value multiplier %g", m)
	}
}

func FuzzParseRateProfile(f *testing.F) {
	for _, s := range []string{
		"const:1", "sin:10m,1,3", "step:20m,3", "piecewise:0s=1,30s=4,1m=0",
		"sin:10m,1,3*step:20m,3", "sin:1h,0,2*piecewise:0s=0,1h=1", "step:1.5h,0x1p-2",
		"", "*", "sin:", "piecewise:1s=1,1s=2", "const:1e6", "step:2562047h47m16.854775807s,1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseRateProfile(s)
		if err != nil {
			return
		}
		str := p.String()
		q, err := ParseRateProfile(str)
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", s, str, err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%q → %q parses differently: %+v vs %+v", s, str, p, q)
		}
		if q.String() != str {
			t.Fatalf("%q prints %q, then %q", s, str, q.String())
		}
		for _, at := range []float64{0, 1, 1e3, 3.6e6, 1e12} {
			if m := p.Multiplier(at); !(m >= 0) || math.IsInf(m, 0) {
				t.Fatalf("%q: m(%g) = %g", s, at, m)
			}
		}
	})
}
