package vllmevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// fakeEngine is an in-process stand-in for a vLLM worker's event sockets:
// a PUB socket and a ROUTER replay socket on loopback, speaking vLLM's
// frames, with a replay buffer the test controls.
type fakeEngine struct {
	t      *testing.T
	pub    zmq4.Socket
	router zmq4.Socket

	mu     sync.Mutex
	buffer map[uint64][]byte // what a replay can return
}

func quietLogger() zmq4.Option { return zmq4.WithLogger(log.New(io.Discard, "", 0)) }

func newFakeEngine(t *testing.T, ctx context.Context) *fakeEngine {
	t.Helper()
	e := &fakeEngine{t: t, buffer: map[uint64][]byte{}}
	e.pub = zmq4.NewPub(ctx, quietLogger())
	t.Cleanup(func() { e.pub.Close() })
	if err := e.pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	e.router = zmq4.NewRouter(ctx, quietLogger())
	t.Cleanup(func() { e.router.Close() })
	if err := e.router.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go e.serveReplay()
	return e
}

func (e *fakeEngine) endpoint() string { return "tcp://" + e.pub.Addr().String() }
func (e *fakeEngine) replayEP() string { return "tcp://" + e.router.Addr().String() }

func payloadFor(seq uint64) []byte {
	return newEnc().v(arr{float64(seq), arr{arr{"BlockStored", ints(seq), nil, arr{}, 16, nil, "GPU"}}, 0}).buf.Bytes()
}

// publish sends batch seq live and keeps it for replays unless lost.
func (e *fakeEngine) publish(seq uint64, live, keep bool) {
	p := payloadFor(seq)
	if keep {
		e.mu.Lock()
		e.buffer[seq] = p
		e.mu.Unlock()
	}
	if live {
		msg := zmq4.NewMsgFrom([]byte("kv"), binary.BigEndian.AppendUint64(nil, seq), p)
		if err := e.pub.SendMulti(msg); err != nil {
			e.t.Errorf("publish %d: %v", seq, err)
		}
	}
}

// serveReplay answers replay requests like vLLM's _service_replay.
func (e *fakeEngine) serveReplay() {
	for {
		msg, err := e.router.Recv()
		if err != nil {
			return // socket closed
		}
		if len(msg.Frames) != 3 || len(msg.Frames[2]) != 8 {
			e.t.Errorf("bad replay request %q", msg.Frames)
			return
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
		e.mu.Lock()
		var seqs []uint64
		for s := range e.buffer {
			if s >= start {
				seqs = append(seqs, s)
			}
		}
		slices.Sort(seqs)
		for _, s := range seqs {
			_ = e.router.SendMulti(zmq4.NewMsgFrom(id, nil, binary.BigEndian.AppendUint64(nil, s), e.buffer[s]))
		}
		e.mu.Unlock()
		_ = e.router.SendMulti(zmq4.NewMsgFrom(id, nil, binary.BigEndian.AppendUint64(nil, EndSeq), nil))
	}
}

// recorder is a Handler that records what it is given as strings.
type recorder struct {
	got chan string
}

func (r *recorder) HandleBatch(seq uint64, b *Batch) error {
	if len(b.Events) != 1 || b.TS != float64(seq) || b.Events[0].Stored.Hashes[0] != seq {
		return fmt.Errorf("batch %d decoded as %+v", seq, b)
	}
	r.got <- fmt.Sprintf("batch %d", seq)
	return nil
}

func (r *recorder) HandleGap(g Gap) error {
	r.got <- fmt.Sprintf("gap %d-%d restart=%v", g.From, g.To, g.Restart)
	return nil
}

// run starts Subscribe and returns its result channel.
func run(ctx context.Context, cfg Config, h Handler) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Subscribe(ctx, cfg, h) }()
	return done
}

// next waits for the handler's next record.
func next(t *testing.T, ctx context.Context, r *recorder) string {
	t.Helper()
	select {
	case s := <-r.got:
		return s
	case <-ctx.Done():
		t.Fatal("timed out waiting for the subscriber")
		return ""
	}
}

// TestSubscribeReplay resumes from seq 0 while the engine publishes, so
// whatever the subscriber missed while connecting comes from the replay
// socket; batches 3-5 are lost for good (evicted from the replay buffer
// and never received live) and must be reported as one gap.
func TestSubscribeReplay(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e := newFakeEngine(t, ctx)
	rec := &recorder{got: make(chan string, 1000)}
	done := run(ctx, Config{Endpoint: e.endpoint(), Topic: "kv", ReplayEndpoint: e.replayEP(), Resume: true}, rec)

	const total = 12
	var want []string
	for s := range total {
		if s >= 3 && s <= 5 {
			if s == 3 {
				want = append(want, "gap 3-6 restart=false")
			}
			continue
		}
		want = append(want, fmt.Sprintf("batch %d", s))
	}
	// Publish on a ticker until everything arrived: early batches may be
	// lost to the PUB/SUB slow-joiner effect; the replay must cover them.
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for s := uint64(0); ; {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if s < total {
				lost := s >= 3 && s <= 5
				e.publish(s, !lost, !lost)
				s++
			}
		}
	}()
	var got []string
	for len(got) < len(want) {
		got = append(got, next(t, ctx, rec))
	}
	close(stop)
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Subscribe = %v, want context.Canceled", err)
	}
}

// TestSubscribeGapsWithoutReplay: without a replay socket a skipped range
// is reported as a gap, and a sequence going backwards as a restart.
func TestSubscribeGapsWithoutReplay(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e := newFakeEngine(t, ctx)
	rec := &recorder{got: make(chan string, 1000)}
	done := run(ctx, Config{Endpoint: e.endpoint()}, rec)

	// Publish increasing batches until the subscriber has joined; then
	// note the first one it saw and drain the stragglers in order.
	first := make(chan uint64)
	var last uint64
	go func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for s := uint64(100); ; s++ {
			select {
			case <-first:
				return
			case <-tick.C:
			}
			e.publish(s, true, false)
			last = s
		}
	}()
	var f uint64
	if _, err := fmt.Sscanf(next(t, ctx, rec), "batch %d", &f); err != nil {
		t.Fatal(err)
	}
	first <- f // the publisher has stopped once this returns
	for s := f + 1; s <= last; s++ {
		if got, want := next(t, ctx, rec), fmt.Sprintf("batch %d", s); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	e.publish(last+3, true, false)
	e.publish(7, true, false)
	for _, want := range []string{
		fmt.Sprintf("gap %d-%d restart=false", last+1, last+3),
		fmt.Sprintf("batch %d", last+3),
		fmt.Sprintf("gap %d-7 restart=true", last+4),
		"batch 7",
	} {
		if got := next(t, ctx, rec); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Subscribe = %v, want context.Canceled", err)
	}
}

// TestSubscribeHandlerError: a handler error stops the subscription and
// is returned.
func TestSubscribeHandlerError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e := newFakeEngine(t, ctx)
	boom := errors.New("boom")
	done := run(ctx, Config{Endpoint: e.endpoint()}, failing{boom})
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for s := uint64(0); ; s++ {
		select {
		case err := <-done:
			if !errors.Is(err, boom) {
				t.Fatalf("Subscribe = %v, want %v", err, boom)
			}
			return
		case <-ctx.Done():
			t.Fatal("timed out")
		case <-tick.C:
			e.publish(s, true, false)
		}
	}
}

type failing struct{ err error }

func (f failing) HandleBatch(uint64, *Batch) error { return f.err }
func (f failing) HandleGap(Gap) error              { return f.err }

func TestSubscribeConfig(t *testing.T) {
	t.Parallel()
	if err := Subscribe(t.Context(), Config{}, failing{}); err == nil {
		t.Fatal("empty endpoint accepted")
	}
}

func TestParseMessage(t *testing.T) {
	t.Parallel()
	seq := binary.BigEndian.AppendUint64(nil, 9)
	tests := []struct {
		name   string
		frames [][]byte
		ok     bool
	}{
		{"vLLM frames", [][]byte{[]byte("t"), seq, {0x90}}, true},
		{"two frames", [][]byte{seq, {0x90}}, false},
		{"short seq", [][]byte{nil, seq[:4], nil}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, s, _, err := ParseMessage(tc.frames)
			if (err == nil) != tc.ok || (tc.ok && s != 9) {
				t.Fatalf("ParseMessage = %d, %v", s, err)
			}
		})
	}
	// Replay replies: vLLM's [delim, seq, payload] and the topic variant.
	for _, frames := range [][][]byte{{nil, seq, {1}}, {nil, []byte("t"), seq, {1}}} {
		if s, p, err := parseReplay(frames); err != nil || s != 9 || p[0] != 1 {
			t.Fatalf("parseReplay(%q) = %d, %v, %v", frames, s, p, err)
		}
	}
}
