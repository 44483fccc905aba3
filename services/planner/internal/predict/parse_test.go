package predict

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec    string
		want    string // type name, or "" for an error
		wantErr string
		is      error
	}{
		{"constant", "*predict.Constant", "", nil},
		{" holt-winters ", "*predict.HoltWinters", "", nil},
		{"holt-winters:alpha=0.5,beta=0.3,gamma=0.1,season=12", "*predict.HoltWinters", "", nil},
		{"holt-winters: alpha = 1 , season=0", "*predict.HoltWinters", "", nil},
		{"kalman:level=0.2,trend=0.001", "*predict.Kalman", "", nil},
		{"", "", "names no kind", nil},
		{"ewma", "", `unknown predictor kind "ewma" (want constant, holt-winters, kalman)`, ErrUnknownKind},
		{"Constant", "", `unknown predictor kind "Constant"`, ErrUnknownKind},
		{"constant:alpha=1", "", `constant takes no parameters, got "alpha=1"`, nil},
		{"holt-winters:", "", "holt-winters: no parameters after the colon", nil},
		{"holt-winters:delta=0.1", "", `holt-winters: unknown parameter "delta" (want alpha, beta, gamma, season)`, ErrUnknownParam},
		{"kalman:alpha=0.1", "", `kalman: unknown parameter "alpha" (want level, trend)`, ErrUnknownParam},
		{"holt-winters:alpha=0", "", "holt-winters: bad parameter value: alpha=0 is outside (0,1]", ErrBadValue},
		{"holt-winters:beta=1.5", "", "beta=1.5 is outside (0,1]", ErrBadValue},
		{"holt-winters:alpha=-0.1", "", "alpha=-0.1 is outside (0,1]", ErrBadValue},
		{"holt-winters:alpha=x", "", "alpha=x is not a number", ErrBadValue},
		{"holt-winters:alpha=NaN", "", "alpha=NaN is not a number", ErrBadValue},
		{"holt-winters:alpha", "", "parameter alpha has no value (want alpha=VALUE)", ErrBadValue},
		{"holt-winters:alpha=0.5,alpha=0.6", "", "parameter alpha given twice", nil},
		{"holt-winters:alpha=0.5,", "", "empty parameter", nil},
		{"holt-winters:season=-1", "", "season=-1 is not a whole number of intervals in [0, 100000]", ErrBadValue},
		{"holt-winters:season=1.5", "", "season=1.5 is not a whole number", ErrBadValue},
		{"holt-winters:season=100001", "", "season=100001 is not a whole number of intervals in [0, 100000]", ErrBadValue},
		{"holt-winters:gamma=0.2", "", "gamma=0.2 has no effect without a season", ErrBadValue},
		{"kalman:level=0", "", "level=0 is not positive", ErrBadValue},
		{"kalman:trend=inf", "", "trend=inf is not a number", ErrBadValue},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			p, err := Parse(tt.spec)
			if tt.want != "" {
				if err != nil {
					t.Fatalf("Parse(%q) = %v", tt.spec, err)
				}
				if got := typeName(p); got != tt.want {
					t.Fatalf("Parse(%q) built %s, want %s", tt.spec, got, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse(%q) = %v, want an error containing %q", tt.spec, err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Parse(%q) = %v, want errors.Is %v", tt.spec, err, tt.is)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind    string
		opts    Options
		wantErr string
	}{
		{"nope", Options{}, `unknown predictor kind "nope"`},
		{KindHoltWinters, Options{Alpha: 2}, "holt-winters: bad parameter value: alpha=2 is outside (0,1]"},
		{KindHoltWinters, Options{Season: -3}, "season=-3 is outside [0, 100000]"},
		{KindKalman, Options{LevelNoise: -1}, "kalman: bad parameter value: level=-1 is not a positive number"},
	}
	for _, tt := range tests {
		if _, err := New(tt.kind, tt.opts); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("New(%q, %+v) = %v, want an error containing %q", tt.kind, tt.opts, err, tt.wantErr)
		}
	}
}

// FuzzParse: Parse never panics, and what it accepts predicts ≥ 0.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"constant", "holt-winters:alpha=0.5,beta=0.3,gamma=0.1,season=12", "kalman:level=1e-9,trend=1e9", "holt-winters:season=999999999999", ":", "a:b=c=d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		p, err := Parse(spec)
		if err != nil {
			return
		}
		for _, v := range []float64{3, 1e300, 0, 5, -1} {
			p.Observe(v)
			if got := p.Predict(); got < 0 {
				t.Fatalf("Parse(%q): Predict = %v", spec, got)
			}
		}
	})
}

func typeName(p Predictor) string {
	switch p.(type) {
	case *Constant:
		return "*predict.Constant"
	case *HoltWinters:
		return "*predict.HoltWinters"
	case *Kalman:
		return "*predict.Kalman"
	}
	return "?"
}
