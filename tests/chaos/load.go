package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Kind is one shape of request the load sends.
type Kind int

// The kinds of request: the two OpenAI generation endpoints, streamed
// and not.
const (
	Completion Kind = iota
	CompletionStream
	Chat
	ChatStream
	kinds
)

func (k Kind) stream() bool { return k == CompletionStream || k == ChatStream }
func (k Kind) chat() bool   { return k == Chat || k == ChatStream }

// prompts are greedy-decoded again and again. The long ones share
// openings (so routers' KV scores matter), exceed the stack's
// disaggregation threshold (so the prefill worker takes part), and are
// more than a decode worker's small cache holds (so blocks are evicted
// and prompts prefilled again, remotely, all along).
var prompts = func() []string {
	openings := []string{
		"Lily and Ben went to the park to play with their ball. The sun was shining and the birds were singing.",
		"Tom had a toy car. He liked to drive it around the house every day after lunch.",
		"Once upon a time, in a small town near the sea, there lived an old fisherman and his cat.",
		"Sara wanted to bake a cake for her mom. She found flour, eggs and sugar in the kitchen.",
	}
	endings := []string{
		" Ben kicked the ball high into the sky and",
		" One morning his mom said that they would go to the beach, so",
		" Then a big dog came running and barked loudly, and",
		" They were very happy and decided to share everything they had, because",
	}
	out := []string{"Once upon a time", "The little dog", "One day, a cat named Tim", "The sky was"}
	for _, o := range openings {
		for _, e := range endings {
			out = append(out, o+e)
		}
	}
	return out
}()

// maxTokens is each request's completion length.
const maxTokens = 24

// Phase counts the requests started while it was current.
type Phase struct {
	Name string
	Sent, OK, Failed, Wrong, Retried, Broken, Migrated,
	Cancelled, Rejected, RemotePrefills atomic.Int64
	// Slowest is the longest a succeeded request took, retries included.
	Slowest atomic.Int64 // nanoseconds

	mu     sync.Mutex
	errors []string // the first few failures, for the report
}

func (p *Phase) fail(err error) {
	p.Failed.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errors) < 8 {
		p.errors = append(p.errors, err.Error())
	}
}

// Errors returns the first failures seen.
func (p *Phase) Errors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.errors...)
}

// Load is a client behind a load balancer: requests alternate between the
// frontends, and one whose connection is refused or reset is sent again to
// the next frontend (as a balancer or a retrying SDK does). Greedy text is
// compared with a reference, so corrupted output never counts as success.
type Load struct {
	Frontends []string // host:port
	Model     string
	// Attempts is how many frontends a request may try (default 4).
	Attempts int
	// Mixed adds, in soak mode, client cancellations and bad requests.
	Mixed bool

	client *http.Client
	refs   map[string]string // kind/prompt → text
	phase  atomic.Pointer[Phase]
	next   atomic.Uint64
}

// NewLoad returns a load over the frontends' addresses.
func NewLoad(frontends []string, model string) *Load {
	l := &Load{Frontends: frontends, Model: model, Attempts: 4,
		client: mesh.client(0)}
	l.phase.Store(&Phase{Name: "warm-up"})
	return l
}

// SetPhase makes p current and returns it.
func (l *Load) SetPhase(name string) *Phase {
	p := &Phase{Name: name}
	l.phase.Store(p)
	return p
}

// Phase is the current phase.
func (l *Load) Phase() *Phase { return l.phase.Load() }

func refKey(k Kind, prompt int) string { return fmt.Sprintf("%v/%d", k.chat(), prompt) }

// Reference records every prompt's greedy text, non-streamed, from the
// first frontend of an undisturbed stack, and checks the streamed text
// equals it.
func (l *Load) Reference(ctx context.Context) error {
	l.refs = map[string]string{}
	for _, k := range []Kind{Completion, Chat} {
		for i := range prompts {
			text, err := l.once(ctx, l.Frontends[0], k, i)
			if err != nil {
				return fmt.Errorf("reference %s: %w", refKey(k, i), err)
			}
			l.refs[refKey(k, i)] = text
			streamed, err := l.once(ctx, l.Frontends[0], k+1, i) // k's streamed kind follows it
			if err != nil {
				return fmt.Errorf("reference %s, streamed: %w", refKey(k, i), err)
			}
			if streamed != text {
				return fmt.Errorf("reference %s: streamed %q, not streamed %q", refKey(k, i), streamed, text)
			}
		}
	}
	return nil
}

// Run keeps workers requests in flight until ctx ends, then waits for
// those in flight to finish: ending the load cancels no request.
func (l *Load) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	reqCtx := context.WithoutCancel(ctx)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				l.one(reqCtx)
			}
		})
	}
	wg.Wait()
}

// one sends one request, retrying on the next frontend as needed, and
// counts it in the phase current when it started.
func (l *Load) one(ctx context.Context) {
	n := l.next.Add(1)
	p := l.Phase()
	if l.Mixed && n%10 == 7 {
		l.bad(ctx, p, n)
		return
	}
	k, prompt := Kind(n%uint64(kinds)), int(n/uint64(kinds))%len(prompts)
	cancelAfter := time.Duration(0)
	if l.Mixed && k.stream() && n%10 == 3 {
		cancelAfter = 50 * time.Millisecond
	}
	p.Sent.Add(1)
	began := time.Now()
	var err error
	for a := range l.Attempts {
		if a > 0 {
			p.Retried.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
		fe := l.Frontends[(int(n)+a)%len(l.Frontends)]
		var text string
		text, err = l.attempt(ctx, fe, k, prompt, cancelAfter)
		if errors.Is(err, errCancelled) {
			p.Cancelled.Add(1)
			return
		}
		if err == nil {
			if want := l.refs[refKey(k, prompt)]; text != want {
				p.Wrong.Add(1)
				p.fail(fmt.Errorf("%s via %s: text %q, reference %q", refKey(k, prompt), fe, text, want))
				return
			}
			p.OK.Add(1)
			for d := int64(time.Since(began)); ; {
				if old := p.Slowest.Load(); d <= old || p.Slowest.CompareAndSwap(old, d) {
					break
				}
			}
			return
		}
		if !retryable(err) {
			break
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			p.Broken.Add(1) // reached a frontend that went away mid-request
		}
	}
	p.fail(err)
}

var (
	errCancelled = errors.New("cancelled by the client")
	errBroken    = errors.New("connection broke mid-response")
)

// retryable reports a connection refused or reset: what a client behind a
// balancer sends to another frontend. HTTP errors are answers, not
// retried.
func retryable(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, errBroken) || errors.Is(err, io.EOF)
}

func (l *Load) once(ctx context.Context, fe string, k Kind, prompt int) (string, error) {
	return l.attempt(ctx, fe, k, prompt, 0)
}

func (l *Load) body(k Kind, prompt int) []byte {
	m := map[string]any{"model": l.Model, "max_tokens": maxTokens, "temperature": 0, "stream": k.stream()}
	if k.chat() {
		m["messages"] = []map[string]string{{"role": "user", "content": prompts[prompt]}}
	} else {
		m["prompt"] = prompts[prompt]
	}
	b, _ := json.Marshal(m)
	return b
}

// attempt sends one request to one frontend and returns its text.
func (l *Load) attempt(ctx context.Context, fe string, k Kind, prompt int, cancelAfter time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	path := "/v1/completions"
	if k.chat() {
		path = "/v1/chat/completions"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, mesh.url(fe)+path, bytes.NewReader(l.body(k, prompt)))
	req.Header.Set("Authorization", "Bearer "+APIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := l.client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return "", fmt.Errorf("%s: HTTP %d: %s", fe, res.StatusCode, bytes.TrimSpace(b))
	}
	if !k.stream() {
		var out struct {
			Choices []struct {
				Text    string `json:"text"`
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
			return "", fmt.Errorf("%s: %w: %w", fe, errBroken, err)
		}
		if len(out.Choices) == 0 {
			return "", fmt.Errorf("%s: no choices", fe)
		}
		return out.Choices[0].Text + out.Choices[0].Message.Content, nil
	}
	if cancelAfter > 0 {
		time.AfterFunc(cancelAfter, cancel)
	}
	text, err := readSSE(res.Body)
	if err != nil && cancelAfter > 0 && ctx.Err() == context.Canceled {
		return "", errCancelled
	}
	if err != nil {
		return text, fmt.Errorf("%s: %w", fe, err)
	}
	if cancelAfter > 0 {
		return "", errCancelled // finished before the cancellation: still a client that left
	}
	return text, nil
}

// readSSE concatenates the streamed text until [DONE].
func readSSE(r io.Reader) (string, error) {
	var b strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			return b.String(), nil
		}
		var ev struct {
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return b.String(), fmt.Errorf("bad event %q: %w", line, err)
		}
		if ev.Error != nil {
			return b.String(), fmt.Errorf("error event: %s", ev.Error.Message)
		}
		for _, c := range ev.Choices {
			b.WriteString(c.Text + c.Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		return b.String(), fmt.Errorf("%w: %w", errBroken, err)
	}
	return b.String(), fmt.Errorf("%w: stream ended without [DONE]", errBroken)
}

// badRequests are requests the frontends must refuse with a 4xx.
var badRequests = []struct {
	name, body string
	key        bool
}{
	{"temperature out of range", `{"model":%q,"prompt":"x","temperature":7}`, true},
	{"unknown model", `{"model":"no-such-model%.0s","prompt":"x"}`, true},
	{"no API key", `{"model":%q,"prompt":"x"}`, false},
	{"malformed JSON", `{"model":%q,"prompt":`, true},
}

// bad sends one request the API must refuse, and counts a 4xx answer as
// Rejected and anything else as a failure.
func (l *Load) bad(ctx context.Context, p *Phase, n uint64) {
	b := badRequests[int(n/10)%len(badRequests)]
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fe := l.Frontends[int(n)%len(l.Frontends)]
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, mesh.url(fe)+"/v1/completions", strings.NewReader(fmt.Sprintf(b.body, l.Model)))
	if b.key {
		req.Header.Set("Authorization", "Bearer "+APIKey)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			p.fail(fmt.Errorf("bad request %q: %w", b.name, err))
		}
		return
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode < 400 || res.StatusCode >= 500 {
		p.fail(fmt.Errorf("bad request %q: HTTP %d, want 4xx", b.name, res.StatusCode))
		return
	}
	p.Rejected.Add(1)
}
