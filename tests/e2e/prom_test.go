package e2e

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// promSample is one sample of a metric in Prometheus's text format: its
// label set as written ("" without labels) and its value.
type promSample struct {
	labels string
	value  float64
}

// label is the value of label name in the sample ("" if absent).
func (s promSample) label(name string) string {
	_, rest, ok := strings.Cut(s.labels, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// samples reads the samples of metric name from a /metrics url.
func samples(tb testing.TB, url, name string) []promSample {
	tb.Helper()
	res, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	var out []promSample
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok || rest == "" || rest[0] != '{' && rest[0] != ' ' {
			continue // another metric whose name starts with this one
		}
		var s promSample
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			s.labels, rest = rest[1:end], rest[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// promSum sums metric name's samples whose labels contain match (all of
// them for "").
func promSum(tb testing.TB, url, name, match string) float64 {
	tb.Helper()
	var sum float64
	for _, s := range samples(tb, url, name) {
		if strings.Contains(s.labels, match) {
			sum += s.value
		}
	}
	return sum
}
