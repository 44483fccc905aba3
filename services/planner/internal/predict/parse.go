package predict

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Errors Parse and New wrap, for errors.Is.
var (
	ErrUnknownKind  = errors.New("unknown predictor kind")
	ErrUnknownParam = errors.New("unknown parameter")
	ErrBadValue     = errors.New("bad parameter value")
)

// paramNames are a kind's parameter names, in the order errors list them;
// ok is false for an unknown kind.
func paramNames(kind string) (names []string, ok bool) {
	switch kind {
	case KindConstant:
		return nil, true
	case KindHoltWinters:
		return []string{"alpha", "beta", "gamma", "season"}, true
	case KindKalman:
		return []string{"level", "trend"}, true
	}
	return nil, false
}

// Parse builds a predictor from a flag value: a kind, optionally followed
// by a colon and comma-separated name=value parameters, as in
// "constant", "holt-winters:alpha=0.5,beta=0.3,gamma=0.1,season=12" or
// "kalman:level=0.1,trend=0.01". Parameters left out take their defaults.
func Parse(spec string) (Predictor, error) {
	kind, list, hasList := strings.Cut(strings.TrimSpace(spec), ":")
	kind = strings.TrimSpace(kind)
	names, ok := paramNames(kind)
	switch {
	case kind == "":
		return nil, fmt.Errorf("predictor spec %q names no kind (want %s)", spec, kindList())
	case !ok:
		return nil, fmt.Errorf("%w %q (want %s)", ErrUnknownKind, kind, kindList())
	case hasList && len(names) == 0:
		return nil, fmt.Errorf("%s takes no parameters, got %q", kind, list)
	case hasList && strings.TrimSpace(list) == "":
		return nil, fmt.Errorf("%s: no parameters after the colon", kind)
	}
	var opts Options
	if hasList {
		if err := parseParams(kind, names, list, &opts); err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
	}
	return New(kind, opts)
}

func parseParams(kind string, names []string, list string, opts *Options) error {
	seen := map[string]bool{}
	for _, kv := range strings.Split(list, ",") {
		name, val, _ := strings.Cut(kv, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		switch {
		case name == "":
			return fmt.Errorf("empty parameter in %q", list)
		case !slices.Contains(names, name):
			return fmt.Errorf("%w %q (want %s)", ErrUnknownParam, name, strings.Join(names, ", "))
		case seen[name]:
			return fmt.Errorf("parameter %s given twice", name)
		case val == "":
			return fmt.Errorf("%w: parameter %s has no value (want %s=VALUE)", ErrBadValue, name, name)
		}
		seen[name] = true
		if err := setParam(opts, name, val); err != nil {
			return err
		}
	}
	if kind == KindHoltWinters && seen["gamma"] && opts.Season == 0 {
		return fmt.Errorf("%w: gamma=%v has no effect without a season (set season)", ErrBadValue, opts.Gamma)
	}
	return nil
}

// setParam parses one value. It checks ranges itself because Options
// reads a zero as "default", and an explicit alpha=0 must be an error.
func setParam(opts *Options, name, val string) error {
	if name == "season" {
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > MaxSeason {
			return fmt.Errorf("%w: season=%s is not a whole number of intervals in [0, %d]", ErrBadValue, val, MaxSeason)
		}
		opts.Season = n
		return nil
	}
	v, err := strconv.ParseFloat(val, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %s=%s is not a number", ErrBadValue, name, val)
	}
	switch name {
	case "alpha", "beta", "gamma":
		if !(v > 0 && v <= 1) {
			return fmt.Errorf("%w: %s=%s is outside (0,1]", ErrBadValue, name, val)
		}
	default: // noise ratios
		if !(v > 0) {
			return fmt.Errorf("%w: %s=%s is not positive", ErrBadValue, name, val)
		}
	}
	switch name {
	case "alpha":
		opts.Alpha = v
	case "beta":
		opts.Beta = v
	case "gamma":
		opts.Gamma = v
	case "level":
		opts.LevelNoise = v
	case "trend":
		opts.TrendNoise = v
	}
	return nil
}

func kindList() string { return strings.Join(Kinds(), ", ") }
