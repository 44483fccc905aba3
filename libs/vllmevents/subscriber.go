package vllmevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/go-zeromq/zmq4"

	"switchyard.dev/libs/mesh/backoff"
)

// Config configures Subscribe.
type Config struct {
	// Endpoint is the engine's PUB socket, e.g. "tcp://10.0.0.5:5557".
	Endpoint string
	// Topic is the subscription prefix; "" receives every topic.
	Topic string
	// ReplayEndpoint is the engine's optional ROUTER replay socket, e.g.
	// "tcp://10.0.0.5:5558". Without it every gap is reported as lost.
	ReplayEndpoint string
	// ReplayTimeout bounds one replay request (default 5s).
	ReplayTimeout time.Duration
	// Resume makes the subscriber expect ResumeFrom as the first sequence
	// number (e.g. the one after a restored snapshot) and replay anything
	// between it and the first batch received. Without Resume the first
	// batch received is delivered as is.
	Resume     bool
	ResumeFrom uint64
	// Logger receives warnings (undecodable batches, failed replays,
	// receive errors). Nil discards them.
	Logger *slog.Logger
}

// Gap reports batches that will never be delivered. The consumer must
// resynchronise that engine's state (e.g. radix.Index.Resync from a dump).
type Gap struct {
	// From and To delimit the lost sequence numbers [From, To). With
	// Restart, To may be below From.
	From, To uint64
	// Restart says the publisher's sequence numbers went backwards: it
	// restarted, so everything known about its cache is stale.
	Restart bool
}

// Handler consumes a subscription. Its methods are called from the
// subscribing goroutine, one at a time, in sequence order. An error stops
// Subscribe, which returns it.
type Handler interface {
	// HandleBatch receives batch seq. b and everything it references are
	// only valid during the call.
	HandleBatch(seq uint64, b *Batch) error
	// HandleGap reports lost batches.
	HandleGap(g Gap) error
}

// Subscribe receives KV event batches from cfg.Endpoint until ctx is done
// or h returns an error, filling gaps from the replay socket when it can
// and reporting them to h when it cannot. It returns ctx.Err() after a
// cancellation. Undecodable batches are reported as one-batch gaps.
func Subscribe(ctx context.Context, cfg Config, h Handler) error {
	if cfg.Endpoint == "" {
		return errors.New("vllmevents: subscribe: empty endpoint")
	}
	if cfg.ReplayTimeout <= 0 {
		cfg.ReplayTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &stream{cfg: cfg, h: h, dupFrom: math.MaxUint64}
	if cfg.Resume {
		s.next, s.known = cfg.ResumeFrom, true
	}
	sub := zmq4.NewSub(ctx, s.socketOptions()...)
	defer sub.Close()
	if err := sub.SetOption(zmq4.OptionSubscribe, cfg.Topic); err != nil {
		return fmt.Errorf("vllmevents: subscribe %q: %w", cfg.Topic, err)
	}
	if err := sub.Dial(cfg.Endpoint); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("vllmevents: dial %s: %w", cfg.Endpoint, err)
	}
	retry := backoff.New(recvRetry, nil)
	for {
		msg, err := sub.Recv()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			// The connection dropped; zmq4 redials by itself. Back off so a
			// persistent error cannot spin.
			wait := retry.Next()
			if backoff.LogWorthy(retry.Failures()) {
				cfg.Logger.Warn("kv events receive failed", "endpoint", cfg.Endpoint, "err", err, "failures", retry.Failures(), "retry_in", wait)
			}
			if !backoff.Sleep(ctx, wait) {
				return ctx.Err()
			}
			continue
		}
		retry.Reset()
		_, seq, payload, err := ParseMessage(msg.Frames)
		if err != nil {
			cfg.Logger.Warn("kv events message dropped", "endpoint", cfg.Endpoint, "err", err)
			continue
		}
		if err := s.receive(ctx, seq, payload); err != nil {
			return err
		}
	}
}

// recvRetry spaces the receives after a failed one: capped, jittered
// backoff (package backoff), so that the workers subscribed to engines
// that restarted together do not poll in lockstep.
var recvRetry = backoff.Policy{Base: 10 * time.Millisecond, Max: time.Second}

// stream is the sequencing state of one subscription.
type stream struct {
	cfg   Config
	h     Handler
	dec   Decoder
	batch Batch
	next  uint64 // next sequence number to deliver, when known
	known bool
	// dupFrom: sequence numbers in [dupFrom, next) were already delivered
	// by a replay, so receiving them live again is expected and harmless.
	// Anything else below next means the publisher restarted.
	dupFrom uint64
}

func (s *stream) socketOptions() []zmq4.Option {
	return []zmq4.Option{
		zmq4.WithLogger(slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn)),
		zmq4.WithDialerMaxRetries(-1), // until ctx is done
		zmq4.WithAutomaticReconnect(true),
	}
}

// receive handles one live batch.
func (s *stream) receive(ctx context.Context, seq uint64, payload []byte) error {
	switch {
	case !s.known || seq == s.next:
	case seq > s.next:
		if err := s.recover(ctx, seq); err != nil {
			return err
		}
		if seq < s.next {
			return nil // the replay delivered it already
		}
	case seq >= s.dupFrom:
		return nil // delivered by a replay
	default:
		s.dupFrom = math.MaxUint64
		if err := s.h.HandleGap(Gap{From: s.next, To: seq, Restart: true}); err != nil {
			return err
		}
	}
	return s.deliver(seq, payload)
}

// deliver decodes and hands over batch seq.
func (s *stream) deliver(seq uint64, payload []byte) error {
	s.next, s.known = seq+1, true
	if err := s.dec.Decode(payload, &s.batch); err != nil {
		s.cfg.Logger.Warn("kv events batch undecodable", "endpoint", s.cfg.Endpoint, "seq", seq, "err", err)
		return s.h.HandleGap(Gap{From: seq, To: seq + 1})
	}
	return s.h.HandleBatch(seq, &s.batch)
}

// recover fills the gap [s.next, upTo) from the replay socket, and reports
// whatever it could not fill.
func (s *stream) recover(ctx context.Context, upTo uint64) error {
	if s.cfg.ReplayEndpoint != "" {
		err := s.replay(ctx, s.next, func(seq uint64, payload []byte) error {
			switch {
			case seq < s.next:
				return nil
			case seq > s.next:
				// The publisher's ring buffer no longer has [next, seq).
				if err := s.h.HandleGap(Gap{From: s.next, To: seq}); err != nil {
					return err
				}
			}
			return s.deliver(seq, payload)
		})
		var herr handlerError
		if errors.As(err, &herr) {
			return herr.err
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.cfg.Logger.Warn("kv events replay failed", "endpoint", s.cfg.ReplayEndpoint, "from", s.next, "err", err)
		}
		s.dupFrom = upTo
	}
	if s.next < upTo {
		from := s.next
		s.next = upTo
		return s.h.HandleGap(Gap{From: from, To: upTo})
	}
	return nil
}

// handlerError marks an error returned by the Handler during a replay, so
// it stops the subscription instead of being logged as a replay failure.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }

// replay asks the replay socket for every batch from start on and calls fn
// for each until the end marker.
func (s *stream) replay(ctx context.Context, start uint64, fn func(seq uint64, payload []byte) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReplayTimeout)
	defer cancel()
	d := zmq4.NewDealer(ctx, s.socketOptions()[:2]...)
	defer d.Close()
	if err := d.Dial(s.cfg.ReplayEndpoint); err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	if err := d.SendMulti(zmq4.NewMsgFrom(replayRequest(start)...)); err != nil {
		return fmt.Errorf("send request: %w", err)
	}
	for {
		msg, err := d.Recv()
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		seq, payload, err := parseReplay(msg.Frames)
		if err != nil {
			return err
		}
		if seq == EndSeq {
			return nil
		}
		if err := fn(seq, payload); err != nil {
			return handlerError{err}
		}
	}
}
