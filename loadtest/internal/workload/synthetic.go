package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"switchyard.dev/libs/mooncake"
	"switchyard.dev/loadtest/internal/arrival"
	"switchyard.dev/loadtest/internal/dist"
	"switchyard.dev/loadtest/internal/openai"
)

// SyntheticConfig configures generated conversations.
type SyntheticConfig struct {
	// Chat sends text messages; otherwise prompts are token ids.
	Chat bool
	// Input and Output are the per-turn new-input and max_tokens lengths.
	Input, Output dist.Dist
	// Turns is the number of turns per session. Each later turn resends the
	// whole conversation so far (its context grows), so a server with a
	// prefix cache sees it hit.
	Turns dist.Dist
	// TurnDelay is the think time between turns of a session.
	TurnDelay time.Duration
	// SharedPrefixRatio is the fraction of each session's first prompt taken
	// from one of PrefixPool shared prefixes (a system prompt).
	SharedPrefixRatio float64
	PrefixPool        int
	// Vocab and TokenMin bound token ids in completions mode.
	Vocab, TokenMin int
	Seed            uint64
	IgnoreEOS       bool
	// Arrivals, when set, gives each session an open-loop arrival offset;
	// the source ends when the schedule does (mooncake.Never, after a rate
	// profile drops to 0 for good).
	Arrivals *arrival.Schedule
}

// Synthetic is an unbounded Source of generated sessions (bounded only by
// an arrival schedule that ends).
type Synthetic struct {
	cfg  SyntheticConfig
	next int
}

// NewSynthetic validates cfg and returns a Source.
func NewSynthetic(cfg SyntheticConfig) (*Synthetic, error) {
	switch {
	case cfg.SharedPrefixRatio < 0 || cfg.SharedPrefixRatio > 1 || math.IsNaN(cfg.SharedPrefixRatio):
		return nil, fmt.Errorf("shared prefix ratio %g: must be in [0, 1]", cfg.SharedPrefixRatio)
	case cfg.PrefixPool < 1:
		return nil, fmt.Errorf("prefix pool %d: must be >= 1", cfg.PrefixPool)
	case !cfg.Chat && (cfg.Vocab < 2 || cfg.TokenMin < 0 || cfg.TokenMin >= cfg.Vocab):
		return nil, fmt.Errorf("vocab %d / token-min %d: need 0 <= token-min < vocab", cfg.Vocab, cfg.TokenMin)
	case cfg.Input.Kind == "" || cfg.Output.Kind == "" || cfg.Turns.Kind == "":
		return nil, fmt.Errorf("synthetic workload: input, output and turns distributions are required")
	}
	return &Synthetic{cfg: cfg}, nil
}

// Next implements Source.
func (s *Synthetic) Next() (Session, bool) {
	var at time.Duration
	if s.cfg.Arrivals != nil {
		if at = s.cfg.Arrivals.Next(); at == mooncake.Never {
			return nil, false
		}
	}
	id := s.next
	s.next++
	rng := rand.New(rand.NewPCG(s.cfg.Seed, uint64(id)))
	return &synthSession{id: id, at: at, cfg: &s.cfg, rng: rng, turns: s.cfg.Turns.Sample(rng)}, true
}

// Timed implements Source.
func (s *Synthetic) Timed() bool { return s.cfg.Arrivals != nil }

// Len implements Source.
func (s *Synthetic) Len() int { return -1 }

type synthSession struct {
	id    int
	at    time.Duration
	cfg   *SyntheticConfig
	rng   *rand.Rand
	turns int
	turn  int
	// Conversation so far: token ids (completions) or messages (chat).
	tokens    []int
	messages  []openai.Message
	lastOut   int
	ctxTokens int
}

func (s *synthSession) ID() int           { return s.id }
func (s *synthSession) At() time.Duration { return s.at }

func (s *synthSession) Next(prevReply string) (Turn, bool) {
	if s.turn >= s.turns {
		return Turn{}, false
	}
	first := s.turn == 0
	s.turn++
	if !first {
		s.appendReply(prevReply)
	}
	in := s.cfg.Input.Sample(s.rng)
	out := s.cfg.Output.Sample(s.rng)
	s.lastOut = out
	prefix := 0
	if first {
		prefix = int(math.Round(s.cfg.SharedPrefixRatio * float64(in)))
	}
	pid := uint64(s.rng.IntN(s.cfg.PrefixPool))
	t := Turn{Request: openai.Request{MaxTokens: out, IgnoreEOS: s.cfg.IgnoreEOS, WantReply: s.cfg.Chat && s.turns > 1}}
	if !first {
		t.Delay = s.cfg.TurnDelay
	}
	if s.cfg.Chat {
		if prefix > 0 {
			s.messages = append(s.messages, openai.Message{Role: "system", Content: s.sharedWords(pid, prefix)})
		}
		s.messages = append(s.messages, openai.Message{Role: "user", Content: s.words(in - prefix)})
		t.Request.Messages = s.messages
	} else {
		s.tokens = s.sharedTokens(s.tokens, pid, prefix)
		s.tokens = s.randTokens(s.tokens, in-prefix)
		t.Request.Tokens = s.tokens
	}
	s.ctxTokens += in
	t.InputTokens = s.ctxTokens
	return t, true
}

// appendReply adds the previous answer to the context: the real text in
// chat mode, else lastOut placeholder tokens (the real output token ids are
// not returned by the completions API).
func (s *synthSession) appendReply(reply string) {
	if s.cfg.Chat {
		if reply == "" {
			reply = s.words(s.lastOut)
		}
		s.messages = append(s.messages, openai.Message{Role: "assistant", Content: reply})
		s.ctxTokens += max(1, len(strings.Fields(reply)))
		return
	}
	s.tokens = s.randTokens(s.tokens, s.lastOut)
	s.ctxTokens += s.lastOut
}

func (s *synthSession) randTokens(dst []int, n int) []int {
	span := s.cfg.Vocab - s.cfg.TokenMin
	for range n {
		dst = append(dst, s.cfg.TokenMin+s.rng.IntN(span))
	}
	return dst
}

// sharedTokens appends the first n tokens of shared prefix pid: a pure
// function of (seed, pid, position), so every session using pid agrees.
func (s *synthSession) sharedTokens(dst []int, pid uint64, n int) []int {
	span := uint64(s.cfg.Vocab - s.cfg.TokenMin)
	base := s.prefixBase(pid)
	for j := range n {
		dst = append(dst, s.cfg.TokenMin+int(mooncake.Mix64(base+uint64(j))%span))
	}
	return dst
}

// prefixBase seeds shared prefix pid: position j of the prefix is drawn from
// mooncake.Mix64(base+j).
func (s *synthSession) prefixBase(pid uint64) uint64 {
	return mooncake.Mix64(s.cfg.Seed ^ mooncake.Mix64(pid+0x51ed270b))
}

// vocabulary is a list of common short English words, each one token in the
// usual BPE vocabularies, so word counts approximate token counts.
var vocabulary = strings.Fields(`the of and to in is you that it he was for on are as with his they at be
this have from or one had by word but not what all were we when your can said there use an each which
she do how their if will up other about out many then them these so some her would make like him into
time has look two more write go see number no way could people my than first water been call who oil
its now find long down day did get come made may part`)

func (s *synthSession) words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[s.rng.IntN(len(vocabulary))])
	}
	return b.String()
}

func (s *synthSession) sharedWords(pid uint64, n int) string {
	base := s.prefixBase(pid)
	var b strings.Builder
	for j := range n {
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[mooncake.Mix64(base+uint64(j))%uint64(len(vocabulary))])
	}
	return b.String()
}
