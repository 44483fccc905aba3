package workload

import (
	"fmt"
	"time"

	"switchyard.dev/libs/trace"
	"switchyard.dev/loadtest/internal/openai"
)

// ReplayConfig configures trace replay.
type ReplayConfig struct {
	Synth trace.Synth
	// Speed divides trace timestamps: 2 replays twice as fast.
	Speed float64
	// UseTimestamps replays at the trace's arrival times; otherwise the
	// runner sends requests as fast as its concurrency allows.
	UseTimestamps bool
	// MaxInputTokens and MaxOutputTokens cap prompt and generation length
	// when positive (after block scaling).
	MaxInputTokens  int
	MaxOutputTokens int
	IgnoreEOS       bool
}

// Replay is a Source over parsed trace records: one single-turn session per
// record, prompt tokens synthesized from its hash ids.
type Replay struct {
	cfg  ReplayConfig
	recs []trace.Record
	next int
}

// NewReplay returns a Source replaying recs (sorted by timestamp).
func NewReplay(recs []trace.Record, cfg ReplayConfig) (*Replay, error) {
	if err := cfg.Synth.Validate(); err != nil {
		return nil, fmt.Errorf("trace replay: %w", err)
	}
	if cfg.Speed <= 0 {
		return nil, fmt.Errorf("trace replay: speed %g must be > 0", cfg.Speed)
	}
	return &Replay{cfg: cfg, recs: recs}, nil
}

// Next implements Source.
func (r *Replay) Next() (Session, bool) {
	if r.next >= len(r.recs) {
		return nil, false
	}
	i := r.next
	r.next++
	rec := r.recs[i]
	at := time.Duration((rec.TimestampMs - r.recs[0].TimestampMs) / r.cfg.Speed * float64(time.Millisecond))
	return &replaySession{id: i, at: at, rec: rec, cfg: &r.cfg}, true
}

// Timed implements Source.
func (r *Replay) Timed() bool { return r.cfg.UseTimestamps }

// Len implements Source.
func (r *Replay) Len() int { return len(r.recs) }

type replaySession struct {
	id   int
	at   time.Duration
	rec  trace.Record
	cfg  *ReplayConfig
	sent bool
}

func (s *replaySession) ID() int           { return s.id }
func (s *replaySession) At() time.Duration { return s.at }

func (s *replaySession) Next(string) (Turn, bool) {
	if s.sent {
		return Turn{}, false
	}
	s.sent = true
	toks := s.cfg.Synth.Tokens(nil, s.rec, s.cfg.MaxInputTokens)
	out := s.rec.OutputLength
	if s.cfg.MaxOutputTokens > 0 {
		out = min(out, s.cfg.MaxOutputTokens)
	}
	return Turn{
		Request:     openai.Request{Tokens: toks, MaxTokens: out, IgnoreEOS: s.cfg.IgnoreEOS},
		InputTokens: len(toks),
	}, true
}
