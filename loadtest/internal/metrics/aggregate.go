package metrics

import (
	"cmp"
	"slices"
	"time"
)

// SLA holds per-request service-level thresholds; a zero field is not
// checked.
type SLA struct {
	TTFT time.Duration `json:"ttft"`
	ITL  time.Duration `json:"itl"`
	E2E  time.Duration `json:"e2e"`
}

// Meets reports whether a successful request is within every threshold. ITL
// is judged on the request's mean inter-chunk gap.
func (s SLA) Meets(r *Record) bool {
	return r.OK() &&
		(s.TTFT <= 0 || r.TTFT <= s.TTFT) &&
		(s.ITL <= 0 || r.MeanITL() <= s.ITL) &&
		(s.E2E <= 0 || r.E2E <= s.E2E)
}

// Goodput is the rate of requests that met the SLA.
type Goodput struct {
	SLATTFTms float64 `json:"sla_ttft_ms"`
	SLAITLms  float64 `json:"sla_itl_ms"`
	SLAE2Ems  float64 `json:"sla_e2e_ms"`
	Met       int     `json:"requests_met"`
	// Fraction is Met over successful requests.
	Fraction float64 `json:"fraction_of_succeeded"`
	RPS      float64 `json:"goodput_rps"`
}

// ErrorCount is how often one error message occurred.
type ErrorCount struct {
	Message string `json:"message"`
	Count   int    `json:"count"`
}

// Aggregates is the summary of a run. Latencies are in milliseconds,
// throughputs per second of the run's duration.
type Aggregates struct {
	DurationS float64 `json:"duration_s"`
	Total     int     `json:"requests_total"`
	Succeeded int     `json:"requests_succeeded"`
	Failed    int     `json:"requests_failed"`
	Canceled  int     `json:"requests_canceled"`

	TTFTms Summary `json:"ttft_ms"`
	// SendLagms is how late requests were sent after their scheduled
	// time (open loop; TTFT starts at the send), over every request sent.
	SendLagms    Summary `json:"send_lag_ms"`
	ITLms        Summary `json:"itl_ms"`
	TPOTms       Summary `json:"tpot_ms"`
	E2Ems        Summary `json:"e2e_ms"`
	InputTokens  Summary `json:"input_tokens"`
	OutputTokens Summary `json:"output_tokens"`

	RequestThroughput     float64 `json:"request_throughput_rps"`
	OutputTokenThroughput float64 `json:"output_token_throughput_tps"`
	InputTokenThroughput  float64 `json:"input_token_throughput_tps"`
	TotalTokenThroughput  float64 `json:"total_token_throughput_tps"`

	PromptTokens  int64   `json:"prompt_tokens_total"`
	CachedTokens  int64   `json:"cached_tokens_total"`
	CacheHitRatio float64 `json:"cache_hit_ratio"`

	Goodput Goodput      `json:"goodput"`
	Errors  []ErrorCount `json:"errors,omitempty"`
}

// maxErrorKinds bounds the error list so a run that fails the same way ten
// thousand times still has a readable summary.
const maxErrorKinds = 10

// Aggregate summarizes recs over a run that lasted duration.
func Aggregate(recs []Record, duration time.Duration, sla SLA) Aggregates {
	a := Aggregates{DurationS: duration.Seconds(), Total: len(recs)}
	var ttft, itl, tpot, e2e, in, out []float64
	var outSum int64
	errs := map[string]int{}
	var lag []float64
	for i := range recs {
		r := &recs[i]
		lag = append(lag, ms(max(r.Start-r.Scheduled, 0)))
		switch {
		case r.Canceled:
			a.Canceled++
			continue
		case r.Err != "":
			a.Failed++
			errs[r.Err]++
			continue
		}
		a.Succeeded++
		ttft = append(ttft, ms(r.TTFT))
		e2e = append(e2e, ms(r.E2E))
		for _, d := range r.ITLs {
			itl = append(itl, ms(d))
		}
		if r.OutputTokens > 1 {
			tpot = append(tpot, ms(r.TPOT()))
		}
		prompt := r.InputTokens
		if r.UsageReported && r.PromptTokens > 0 {
			prompt = r.PromptTokens
		}
		in = append(in, float64(prompt))
		out = append(out, float64(r.OutputTokens))
		outSum += int64(r.OutputTokens)
		a.PromptTokens += int64(prompt)
		a.CachedTokens += int64(r.CachedTokens)
		if sla.Meets(r) {
			a.Goodput.Met++
		}
	}
	a.TTFTms, a.ITLms, a.TPOTms, a.E2Ems = Summarize(ttft), Summarize(itl), Summarize(tpot), Summarize(e2e)
	a.SendLagms = Summarize(lag)
	a.InputTokens, a.OutputTokens = Summarize(in), Summarize(out)
	if a.PromptTokens > 0 {
		a.CacheHitRatio = float64(a.CachedTokens) / float64(a.PromptTokens)
	}
	a.Goodput.SLATTFTms, a.Goodput.SLAITLms, a.Goodput.SLAE2Ems = ms(sla.TTFT), ms(sla.ITL), ms(sla.E2E)
	if a.Succeeded > 0 {
		a.Goodput.Fraction = float64(a.Goodput.Met) / float64(a.Succeeded)
	}
	if s := duration.Seconds(); s > 0 {
		a.RequestThroughput = float64(a.Succeeded) / s
		a.OutputTokenThroughput = float64(outSum) / s
		a.InputTokenThroughput = float64(a.PromptTokens) / s
		a.TotalTokenThroughput = float64(a.PromptTokens+outSum) / s
		a.Goodput.RPS = float64(a.Goodput.Met) / s
	}
	a.Errors = topErrors(errs)
	return a
}

func topErrors(errs map[string]int) []ErrorCount {
	out := make([]ErrorCount, 0, len(errs))
	for m, c := range errs {
		out = append(out, ErrorCount{Message: m, Count: c})
	}
	slices.SortFunc(out, func(a, b ErrorCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Message, b.Message))
	})
	if len(out) > maxErrorKinds {
		out = out[:maxErrorKinds]
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
