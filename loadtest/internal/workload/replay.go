package workload

import (
	"fmt"
	"time"

	"switchyard.dev/libs/mooncake"
	"switchyard.dev/loadtest/internal/openai"
)

// ReplayConfig configures trace replay: the prompts, lengths and arrival
// times of mooncake.Replay (a rate profile included), and how to send them.
type ReplayConfig struct {
	mooncake.Replay
	// UseTimestamps replays at the trace's arrival times; otherwise the
	// runner sends requests as fast as its concurrency allows.
	UseTimestamps bool
	IgnoreEOS     bool
}

// Replay is a Source over parsed trace records: one single-turn session per
// record, prompt tokens synthesized from its hash ids.
type Replay struct {
	cfg  ReplayConfig
	recs []mooncake.Record
	next int
}

// NewReplay returns a Source replaying recs (sorted by timestamp). With
// timestamps and a rate profile whose multiplier drops to 0 for good, the
// records after that point are never sent: Len counts only the others.
func NewReplay(recs []mooncake.Record, cfg ReplayConfig) (*Replay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("trace replay: %w", err)
	}
	if cfg.UseTimestamps && cfg.Rate != nil {
		// Arrival times only grow along sorted records, so the
		// unreached ones are a suffix.
		n := len(recs)
		for n > 0 && cfg.At(recs[n-1], recs[0]) == mooncake.Never {
			n--
		}
		recs = recs[:n]
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
	return &replaySession{id: i, at: r.cfg.At(rec, r.recs[0]), rec: rec, cfg: &r.cfg}, true
}

// Timed implements Source.
func (r *Replay) Timed() bool { return r.cfg.UseTimestamps }

// Len implements Source.
func (r *Replay) Len() int { return len(r.recs) }

type replaySession struct {
	id   int
	at   time.Duration
	rec  mooncake.Record
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
	toks := s.cfg.Prompt(nil, s.rec)
	return Turn{
		Request:     openai.Request{Tokens: toks, MaxTokens: s.cfg.Output(s.rec), IgnoreEOS: s.cfg.IgnoreEOS},
		InputTokens: len(toks),
	}, true
}
