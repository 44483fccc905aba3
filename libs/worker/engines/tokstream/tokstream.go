// Package tokstream turns the token ids a third-party engine streams into
// the outputs the built-in engine would have produced for the same
// tokens: the same stop tokens (the model's EOS and BOS unless IgnoreEOS,
// and the request's), the same stop strings over the same decoded text
// (tokenizer.TextStream, which the frontend decodes with too), the same
// limits (max tokens, the context) and the same finish reasons and usage.
//
// Applying the stop conditions here rather than in the engine keeps a
// worker's output independent of which engine computed it: an engine
// knows only its own end-of-generation tokens and decodes text its own
// way, and a stream that stopped here is cancelled in the engine.
//
// A Stream is fed by one goroutine of the adapter (Token, then End) and
// read by the handler (Recv); outputs queue, so the engine's reader never
// waits for a slow client. A stream that ends here holds its final output
// back until the adapter calls End: the adapter first records what the
// engine now caches, so a client's next request, sent the moment this one
// ends, finds it.
package tokstream

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/tokenizer"
)

// Model is what a stream needs to know about the served model.
type Model struct {
	// Tokenizer decodes text; nil streams token ids only, and a request
	// with stop strings is refused.
	Tokenizer tokenizer.Tokenizer
	// StopTokens end generation unless the request ignores EOS (the
	// built-in engine's: EOS and BOS).
	StopTokens []uint32
	VocabSize  int
	// ContextLen bounds prompt plus output, as engine.ModelInfo.ContextLen.
	ContextLen int
}

// Validate checks r as the built-in engine does, naming the field of an
// invalid request (engine.FieldError, matching engine.ErrInvalidRequest).
// Unsupported features (an engine that computes no logprobs, say) are the
// adapter's to refuse.
func Validate(m Model, r engine.Request) error {
	switch {
	case len(r.Prompt) == 0:
		return invalid("token_ids", engine.ErrEmptyPrompt, "request %q", r.ID)
	case len(r.Prompt) >= m.ContextLen:
		return invalid("token_ids", engine.ErrPromptTooLong, "request %q: %d tokens, the context holds %d (prompt and output)", r.ID, len(r.Prompt), m.ContextLen)
	case r.Stop.MaxTokens <= 0:
		return invalid("stop.max_tokens", engine.ErrInvalidMaxTokens, "request %q: got %d", r.ID, r.Stop.MaxTokens)
	case len(r.Stop.StopStrings) > 0 && m.Tokenizer == nil:
		return invalid("stop.stop", engine.ErrInvalidStop, "request %q: stop strings need the worker's tokenizer", r.ID)
	case len(r.Stop.StopStrings) > engine.MaxStopStrings:
		return invalid("stop.stop", engine.ErrInvalidStop, "request %q: %d stop strings, at most %d", r.ID, len(r.Stop.StopStrings), engine.MaxStopStrings)
	case len(r.Stop.StopTokenIDs) > engine.MaxStopTokenIDs:
		return invalid("stop.stop_token_ids", engine.ErrInvalidStop, "request %q: %d stop tokens, at most %d", r.ID, len(r.Stop.StopTokenIDs), engine.MaxStopTokenIDs)
	case r.FirstToken != nil:
		return invalid("first_token", engine.ErrInvalidRequest, "request %q: a first token from a remote prefill needs the built-in engine", r.ID)
	}
	for i, t := range r.Prompt {
		if int(t) >= m.VocabSize {
			return invalid("token_ids", engine.ErrTokenOutOfRange, "request %q: prompt[%d] = %d, vocabulary has %d", r.ID, i, t, m.VocabSize)
		}
	}
	for _, t := range r.Stop.StopTokenIDs {
		if int(t) >= m.VocabSize {
			return invalid("stop.stop_token_ids", engine.ErrTokenOutOfRange, "request %q: stop token %d, vocabulary has %d", r.ID, t, m.VocabSize)
		}
	}
	for _, s := range r.Stop.StopStrings {
		switch {
		case s == "":
			return invalid("stop.stop", engine.ErrInvalidStop, "request %q: empty stop string", r.ID)
		case len(s) > engine.MaxStopStringBytes:
			return invalid("stop.stop", engine.ErrInvalidStop, "request %q: a stop string of %d bytes, at most %d", r.ID, len(s), engine.MaxStopStringBytes)
		}
	}
	if err := r.Sampling.Validate(); err != nil {
		return invalid("sampling", engine.ErrInvalidSampling, "request %q: %v", r.ID, err)
	}
	return nil
}

// Invalid is an invalid-request error about field, wrapping kind (one of
// the engine's validation errors), for adapters refusing what their engine
// cannot do.
func Invalid(field string, kind error, format string, args ...any) error {
	return invalid(field, kind, format, args...)
}

func invalid(field string, kind error, format string, args ...any) error {
	return &engine.FieldError{Field: field, Err: fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), kind)}
}

// MaxNew is how many tokens the engine should be asked for: the request's
// limit, or fewer when the context fills first (the stream ends then with
// FinishLength, as the built-in engine's does).
func MaxNew(m Model, r engine.Request) int {
	return max(min(r.Stop.MaxTokens, m.ContextLen-len(r.Prompt)), 0)
}

// Stream is one request's outputs (an engines.Stream).
type Stream struct {
	r      engine.Request
	maxNew int
	text   *tokenizer.TextStream
	stops  map[uint32]bool
	cancel func()

	mu        sync.Mutex
	queue     []engine.Output
	final     *engine.Output // ended here, held back until End
	finished  bool           // no more tokens are taken
	closed    bool           // the final output is queued
	generated int
	cached    int
	queued    time.Duration
	notify    chan struct{}
}

// New starts the stream of r, which Validate accepted. cancel stops the
// engine's request (closes its HTTP stream); it is called by Cancel, and
// must be safe to call more than once.
func New(m Model, r engine.Request, cancel func()) *Stream {
	s := &Stream{r: r, maxNew: MaxNew(m, r), cancel: cancel, stops: map[uint32]bool{}, notify: make(chan struct{}, 1)}
	if m.Tokenizer != nil {
		s.text = tokenizer.NewTextStream(m.Tokenizer, r.Prompt[len(r.Prompt)-1], r.Stop.StopStrings)
	}
	for _, t := range r.Stop.StopTokenIDs {
		s.stops[t] = true
	}
	if !r.Stop.IgnoreEOS {
		for _, t := range m.StopTokens {
			s.stops[t] = true
		}
	}
	return s
}

// SetCached records how many prompt tokens the engine served from its
// cache (usage.cached_tokens), reported from the next output on.
func (s *Stream) SetCached(n int) {
	s.mu.Lock()
	s.cached = min(max(n, 0), len(s.r.Prompt))
	s.mu.Unlock()
}

// SetQueueTime records the wait before the engine took the request,
// reported on the first output (engine.Output.QueueTime).
func (s *Stream) SetQueueTime(d time.Duration) {
	s.mu.Lock()
	s.queued = d
	s.mu.Unlock()
}

// Token handles one sampled token. It returns false once the stream has
// finished (this token or an earlier one stopped it): the caller stops
// reading (or reads the engine's own end), cancels the engine's request if
// it still runs, and calls End.
func (s *Stream) Token(tok uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return false
	}
	s.generated++
	if s.stops[tok] {
		s.finishLocked(engine.Output{}, engine.FinishStop, nil)
		return false
	}
	out := engine.Output{TokenIDs: []uint32{tok}}
	stopped := false
	if s.text != nil {
		out.Text, stopped = s.text.Push(tok)
	}
	if s.generated == 1 {
		out.QueueTime = s.queued
	}
	switch {
	case stopped:
		s.finishLocked(out, engine.FinishStop, nil)
	case s.generated >= s.maxNew:
		s.finishLocked(out, engine.FinishLength, nil)
	default:
		out.Usage = s.usageLocked()
		s.pushLocked(out)
		return true
	}
	return false
}

// Generated is the number of tokens handled so far, stop tokens included.
func (s *Stream) Generated() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.generated
}

// End queues the final output: the one Token held back if the stream
// ended here, else one as the engine ended it: reason FinishStop (the
// engine's own end-of-generation token), FinishLength, FinishCancelled
// (err: the context's), or FinishError (err says why; wrap
// engines.ErrUnavailable for an engine that went away, so the caller
// retries elsewhere). Later calls do nothing.
func (s *Stream) End(reason engine.FinishReason, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if !s.finished {
		s.finishLocked(engine.Output{}, reason, err)
	}
	s.final.Usage = s.usageLocked() // SetCached may have come since
	s.pushLocked(*s.final)
	s.final, s.closed = nil, true
}

// Finished reports whether the stream takes no more tokens.
func (s *Stream) Finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished
}

func (s *Stream) finishLocked(out engine.Output, reason engine.FinishReason, err error) {
	if (reason == engine.FinishStop || reason == engine.FinishLength) && s.text != nil {
		out.Text += s.text.Flush()
	}
	out.Finish, out.Err, out.Usage = reason, err, s.usageLocked()
	s.final, s.finished = &out, true
}

func (s *Stream) usageLocked() engine.Usage {
	return engine.Usage{PromptTokens: len(s.r.Prompt), CompletionTokens: s.generated, CachedPromptTokens: s.cached}
}

func (s *Stream) pushLocked(o engine.Output) {
	s.queue = append(s.queue, o)
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Recv returns the next output, queued ones first even when ctx is done;
// after the final one, io.EOF.
func (s *Stream) Recv(ctx context.Context) (engine.Output, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			o := s.queue[0]
			s.queue[0] = engine.Output{}
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return o, nil
		}
		done := s.closed
		s.mu.Unlock()
		if done {
			return engine.Output{}, io.EOF
		}
		select {
		case <-ctx.Done():
			return engine.Output{}, ctx.Err()
		case <-s.notify:
		}
	}
}

// Cancel stops the request: the engine's request is cancelled and the
// stream ends with FinishCancelled (or the final output it already had).
func (s *Stream) Cancel() {
	s.End(engine.FinishCancelled, context.Canceled)
	s.cancel()
}
