package promqlnames

import (
	"slices"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`rate(a_total{model=~"$model"}[5m])`, []string{"a_total"}},
		{`sum by (model, le) (rate(h_bucket[$__rate_interval]))`, []string{"h_bucket"}},
		{`histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m])))`, []string{"x_bucket"}},
		{`a / on (instance) group_left (version) b`, []string{"a", "b"}},
		{`model:x:rate5m > 0.5 * (model:x:rate5m offset 1h) and y > 0.2`, []string{"model:x:rate5m", "y"}},
		{`label_replace(a, "tier", "device", "", "")`, []string{"a"}},
		{`count by (service) (up{job="switchyard", service=~"decode|prefill"} == 1)`, []string{"up"}},
		{`{__name__="x"}`, nil},
		{`a{l="}by("} unless b`, []string{"a", "b"}},
		{`sum without (instance) (c) or vector(0)`, []string{"c"}},
		{`1e3 + 0x1f + 5m + inf + NaN`, nil},
		{`max(a) by (model) # comment b`, []string{"a"}},
		{`rate(a[5m:1m]) + ${var} + $v`, []string{"a"}},
		{`a @ start()`, []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			t.Parallel()
			if got := Names(tc.expr); !slices.Equal(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
				t.Errorf("Names(%q) = %q; want %q", tc.expr, got, tc.want)
			}
		})
	}
}

// Names never panics, and every name it returns is a word of the input.
func FuzzNames(f *testing.F) {
	for _, s := range []string{`up`, `rate(a{b="c"}[5m])`, `sum by (x) (y) / on() z`, `"unterminated`, `a{`, `[`, `$`, `${`, `1.5e3m`, "a\\", "`raw\\`"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		for _, n := range Names(expr) {
			if n == "" || !strings.Contains(expr, n) {
				t.Fatalf("Names(%q) returned %q", expr, n)
			}
		}
	})
}
