// Package metrics holds the per-request measurement record and turns a set of
// records into the aggregates a benchmark reports: latency distributions,
// throughput, cache hits and SLA goodput.
//
// Everything here is pure: durations come in on the records and the run's
// length is passed by the caller, so aggregates are tested with fixed numbers
// and never depend on the clock.
package metrics

import (
	"time"
)

// Record is what the client measured for one request. Offsets are relative
// to the start of the run.
type Record struct {
	ID      int `json:"id"`
	Session int `json:"session"`
	Turn    int `json:"turn"`
	// Scheduled is when the request was due (open loop) and Start when it
	// was actually sent; the gap shows a client that cannot keep up.
	Scheduled time.Duration `json:"scheduled"`
	Start     time.Duration `json:"start"`
	// TTFT is the time to the first chunk carrying output, E2E the time to
	// the end of the stream.
	TTFT time.Duration `json:"ttft"`
	E2E  time.Duration `json:"e2e"`
	// ITLs are the gaps between successive output-bearing chunks.
	ITLs []time.Duration `json:"-"`
	// InputTokens is the prompt length the client sent (token ids in
	// completions mode, an estimate in chat mode); PromptTokens is what the
	// server reported in usage.
	InputTokens  int `json:"input_tokens"`
	PromptTokens int `json:"prompt_tokens"`
	MaxTokens    int `json:"max_tokens"`
	// OutputTokens comes from usage when the server reports it, otherwise
	// it is the count of output-bearing chunks.
	OutputTokens  int  `json:"output_tokens"`
	Chunks        int  `json:"chunks"`
	CachedTokens  int  `json:"cached_tokens"`
	UsageReported bool `json:"usage_reported"`
	Status        int  `json:"status"`
	// Err is empty on success. Canceled marks a request cut off by the end
	// of the run (interrupt or grace period), which is neither a success nor
	// a server failure.
	Err      string `json:"error,omitempty"`
	Canceled bool   `json:"canceled,omitempty"`
}

// OK reports whether the request completed successfully.
func (r *Record) OK() bool { return r.Err == "" && !r.Canceled }

// Failed reports whether the request ended in an error other than
// cancellation.
func (r *Record) Failed() bool { return r.Err != "" && !r.Canceled }

// TPOT is the time per output token after the first:
// (E2E - TTFT) / (OutputTokens - 1). Zero when fewer than two tokens.
func (r *Record) TPOT() time.Duration {
	if r.OutputTokens < 2 {
		return 0
	}
	return (r.E2E - r.TTFT) / time.Duration(r.OutputTokens-1)
}

// MeanITL is the mean gap between output chunks, zero with fewer than two.
func (r *Record) MeanITL() time.Duration {
	if len(r.ITLs) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range r.ITLs {
		sum += d
	}
	return sum / time.Duration(len(r.ITLs))
}

// End is the offset at which the request finished.
func (r *Record) End() time.Duration { return r.Start + r.E2E }
