package dist

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Dist
		wantErr bool
	}{
		{in: "512", want: Dist{Kind: Fixed, A: 512}},
		{in: "fixed:128", want: Dist{Kind: Fixed, A: 128}},
		{in: "uniform:10, 20", want: Dist{Kind: Uniform, A: 10, B: 20}},
		{in: "normal:512,64", want: Dist{Kind: Normal, A: 512, B: 64}},
		{in: "NORMAL:5,0", want: Dist{Kind: Normal, A: 5, B: 0}},
		{in: "", wantErr: true},
		{in: "0", wantErr: true},
		{in: "uniform:20,10", wantErr: true},
		{in: "uniform:10", wantErr: true},
		{in: "normal:10,-1", wantErr: true},
		{in: "zipf:1,2", wantErr: true},
		{in: "fixed:NaN", wantErr: true},
		{in: "fixed:1e300", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Parse(%q) err = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSample(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec     string
		lo, hi   int
		wantMean float64
		tol      float64
	}{
		{spec: "fixed:7", lo: 7, hi: 7, wantMean: 7, tol: 0},
		{spec: "uniform:10,20", lo: 10, hi: 20, wantMean: 15, tol: 0.2},
		{spec: "normal:500,50", lo: 1, hi: 1 << 30, wantMean: 500, tol: 2},
		{spec: "normal:1,100", lo: 1, hi: 1 << 30, wantMean: -1, tol: 0},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			d, err := Parse(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			const n = 20000
			sum := 0.0
			for range n {
				v := d.Sample(r)
				if v < tt.lo || v > tt.hi {
					t.Fatalf("sample %d outside [%d,%d]", v, tt.lo, tt.hi)
				}
				sum += float64(v)
			}
			if tt.wantMean >= 0 && math.Abs(sum/n-tt.wantMean) > tt.tol {
				t.Fatalf("mean %.2f, want %.2f±%.2f", sum/n, tt.wantMean, tt.tol)
			}
		})
	}
}

func TestStringRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"fixed:3", "uniform:1,9", "normal:100,12.5"} {
		d, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if d.String() != s {
			t.Errorf("String() = %q, want %q", d.String(), s)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"512", "uniform:1,2", "normal:5,1", "x:", ":", "fixed:1,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		r := rand.New(rand.NewPCG(3, 4))
		if v := d.Sample(r); v < Min {
			t.Fatalf("Sample = %d < Min", v)
		}
		if _, err := Parse(d.String()); err != nil {
			t.Fatalf("re-parse of %q: %v", d.String(), err)
		}
	})
}
