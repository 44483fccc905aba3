package metricslint

import (
	"strings"
	"testing"
)

func TestLint(t *testing.T) {
	t.Parallel()
	perModel := Config{PerModel: func(name string) bool { return strings.HasPrefix(name, "m_") }}
	cases := []struct {
		name, exposition string
		want             string // a substring of the one problem, "" for none
	}{
		{"good counter", "# HELP a_total h\n# TYPE a_total counter\na_total 1\n", ""},
		{"counter without _total", "# HELP a h\n# TYPE a counter\na 1\n", "counter does not end in _total"},
		{"gauge with _total", "# HELP a_total h\n# TYPE a_total gauge\na_total 1\n", "gauge ends in _total"},
		{"rate gauge", "# HELP tokens_per_second h\n# TYPE tokens_per_second gauge\ntokens_per_second 1\n", "in-process rate"},
		{"histogram without unit", "# HELP lat h\n# TYPE lat histogram\nlat_bucket{le=\"+Inf\"} 1\nlat_sum 1\nlat_count 1\n", "does not end in a unit"},
		{"histogram in seconds", "# HELP lat_seconds h\n# TYPE lat_seconds histogram\nlat_seconds_bucket{le=\"+Inf\"} 1\nlat_seconds_sum 1\nlat_seconds_count 1\n", ""},
		{"milliseconds", "# HELP lat_milliseconds h\n# TYPE lat_milliseconds gauge\nlat_milliseconds 1\n", "non-base unit"},
		{"per-model with model", "# HELP m_a_total h\n# TYPE m_a_total counter\nm_a_total{model=\"x\"} 1\n", ""},
		{"per-model without model", "# HELP m_a_total h\n# TYPE m_a_total counter\nm_a_total{model=\"x\"} 1\nm_a_total{worker=\"w\"} 1\n", "without a model label"},
		{"gauge in a unit", "# HELP step_time_seconds h\n# TYPE step_time_seconds gauge\nstep_time_seconds 1\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			probs, err := Lint([]byte(tc.exposition), perModel)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && len(probs) > 0:
				t.Errorf("problems %v; want none", probs)
			case tc.want != "" && (len(probs) == 0 || !strings.Contains(probs[0].Text, tc.want)):
				t.Errorf("problems %v; want one with %q", probs, tc.want)
			}
		})
	}
}

func TestLintBadExposition(t *testing.T) {
	t.Parallel()
	if _, err := Lint([]byte("# TYPE a counter\na{ 1\n"), Config{}); err == nil {
		t.Fatal("malformed exposition linted without error")
	}
}

func TestLintExempt(t *testing.T) {
	t.Parallel()
	exp := []byte("# HELP a_percent h\n# TYPE a_percent gauge\na_percent 1\n")
	probs, err := Lint(exp, Config{Exempt: []string{"a_percent"}})
	if err != nil || len(probs) > 0 {
		t.Fatalf("exempt family: problems %v, err %v", probs, err)
	}
}
