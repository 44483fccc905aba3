package llamacpp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// client speaks llama-server's HTTP API: the native /completion endpoint
// (token ids in and out, a slot per request) and what describes the
// server (/health, /props, /v1/models, /metrics).
type client struct {
	base string
	http *http.Client
}

// httpError is an answer other than 200.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return fmt.Sprintf("answered %d: %s", e.status, e.msg) }

func (c *client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// Every call here is safe to send twice: GETs only read, and net/http
	// resends only a request no byte of whose answer came back, so the
	// caller still sees one generation and the slot ends up holding the
	// same prompt. Saying so lets net/http resend a request that met a
	// keep-alive connection llama-server (cpp-httplib) closed under it,
	// which it does now and then at any load, rather than fail it with
	// EOF. The nil value marks the request without sending a header.
	req.Header["Idempotency-Key"] = nil
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return nil, &httpError{status: res.StatusCode, msg: errorMessage(b)}
	}
	return res, nil
}

// errorMessage is llama-server's {"error":{"message":...}}, or the body.
func errorMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(b))
}

func (c *client) getJSON(ctx context.Context, path string, v any) error {
	res, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return fmt.Errorf("GET %s%s: %w", c.base, path, err)
	}
	defer res.Body.Close()
	defer drain(res.Body)
	if err := json.NewDecoder(io.LimitReader(res.Body, 16<<20)).Decode(v); err != nil {
		return fmt.Errorf("GET %s%s: %w", c.base, path, err)
	}
	return nil
}

// drain reads what is left of a small answer, so that closing it puts
// its connection back in the pool instead of closing that too.
func drain(body io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
}

// health is nil once the model is loaded (503 while loading).
func (c *client) health(ctx context.Context) error {
	res, err := c.do(ctx, http.MethodGet, "/health", nil)
	if err != nil {
		return fmt.Errorf("GET %s/health: %w", c.base, err)
	}
	drain(res.Body)
	res.Body.Close()
	return nil
}

// props is what /props says about the server.
type props struct {
	TotalSlots int `json:"total_slots"`
	Settings   struct {
		NCtx int `json:"n_ctx"` // per slot
	} `json:"default_generation_settings"`
	ModelAlias      string `json:"model_alias"`
	ModelPath       string `json:"model_path"`
	EndpointSlots   bool   `json:"endpoint_slots"`
	EndpointMetrics bool   `json:"endpoint_metrics"`
}

// model is one entry of /v1/models.
type model struct {
	ID      string   `json:"id"`
	Aliases []string `json:"aliases"`
	Meta    struct {
		NVocab    int `json:"n_vocab"`
		NCtxTrain int `json:"n_ctx_train"`
	} `json:"meta"`
}

func (c *client) models(ctx context.Context) ([]model, error) {
	var m struct {
		Data []model `json:"data"`
	}
	err := c.getJSON(ctx, "/v1/models", &m)
	return m.Data, err
}

// serverMetrics are the /metrics samples the worker reads.
type serverMetrics struct {
	processing, deferred    float64
	promptTokens, cachedTok float64
	predicted, predictedTPS float64
}

func (c *client) metrics(ctx context.Context) (serverMetrics, error) {
	res, err := c.do(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return serverMetrics{}, fmt.Errorf("GET %s/metrics: %w", c.base, err)
	}
	defer res.Body.Close()
	defer drain(res.Body)
	var m serverMetrics
	dst := map[string]*float64{
		"llamacpp:requests_processing":        &m.processing,
		"llamacpp:requests_deferred":          &m.deferred,
		"llamacpp:prompt_tokens_total":        &m.promptTokens,
		"llamacpp:prompt_tokens_cached_total": &m.cachedTok,
		"llamacpp:tokens_predicted_total":     &m.predicted,
		"llamacpp:predicted_tokens_seconds":   &m.predictedTPS,
	}
	sc := bufio.NewScanner(io.LimitReader(res.Body, 1<<20))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if p := dst[name]; ok && p != nil {
			if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
				*p = v
			}
		}
	}
	return m, sc.Err()
}

// completion is the body of POST /completion.
type completion struct {
	Prompt      []uint32 `json:"prompt"`
	NPredict    int      `json:"n_predict"`
	Stream      bool     `json:"stream"`
	ReturnToken bool     `json:"return_tokens"`
	IDSlot      int      `json:"id_slot"`
	CachePrompt bool     `json:"cache_prompt"`
	// With timings on every chunk the first one says how much of the
	// prompt came from the slot's cache.
	TimingsPerToken bool    `json:"timings_per_token"`
	IgnoreEOS       bool    `json:"ignore_eos"`
	Temperature     float32 `json:"temperature"`
	TopK            int     `json:"top_k"`
	TopP            float32 `json:"top_p"`
	// llama-server's own samplers, off: the request's parameters are the
	// built-in engine's, which has none of these.
	MinP          float32 `json:"min_p"`
	TypicalP      float32 `json:"typical_p"`
	RepeatPenalty float32 `json:"repeat_penalty"`
	DryMultiplier float32 `json:"dry_multiplier"`
	XTCProb       float32 `json:"xtc_probability"`
	TopNSigma     float32 `json:"top_n_sigma"`
	Mirostat      int     `json:"mirostat"`
	Seed          *uint32 `json:"seed,omitempty"`
}

// chunk is one streamed event of /completion.
type chunk struct {
	Tokens       []uint32 `json:"tokens"`
	Stop         bool     `json:"stop"`
	StopType     string   `json:"stop_type"`
	TokensCached int      `json:"tokens_cached"`
	Timings      *struct {
		CacheN int `json:"cache_n"`
	} `json:"timings"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// completionStream reads the server-sent events of one /completion.
type completionStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

func (c *client) complete(ctx context.Context, body *completion) (*completionStream, error) {
	res, err := c.do(ctx, http.MethodPost, "/completion", body) //nolint:bodyclose // the stream owns the body; close closes it
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 16<<10), 8<<20)
	return &completionStream{body: res.Body, sc: sc}, nil
}

// errStreamEnded is a stream that ended without its final event.
var errStreamEnded = errors.New("stream ended before its final event")

// next returns the next event.
func (s *completionStream) next(c *chunk) error {
	for s.sc.Scan() {
		data, ok := bytes.CutPrefix(s.sc.Bytes(), []byte("data: "))
		if !ok {
			// An error before the stream began, as plain JSON, or an
			// "error:" event.
			data, ok = bytes.CutPrefix(s.sc.Bytes(), []byte("error: "))
			if !ok {
				continue
			}
		}
		*c = chunk{}
		if err := json.Unmarshal(data, c); err != nil {
			return fmt.Errorf("decoding a /completion event: %w", err)
		}
		return nil
	}
	if err := s.sc.Err(); err != nil {
		return err
	}
	return errStreamEnded
}

func (s *completionStream) close() { _ = s.body.Close() }

// busySlots counts the slots /slots says are processing.
func (c *client) busySlots(ctx context.Context) (int, error) {
	var s []struct {
		IsProcessing bool `json:"is_processing"`
	}
	if err := c.getJSON(ctx, "/slots", &s); err != nil {
		return 0, err
	}
	n := 0
	for _, x := range s {
		if x.IsProcessing {
			n++
		}
	}
	return n, nil
}
