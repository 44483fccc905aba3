// Package fakeopenai is an in-memory stand-in for an OpenAI-compatible
// streaming server, for tests: it serves /v1/models, /v1/completions and
// /v1/chat/completions, streams max_tokens chunks, reports usage with a
// simulated prefix cache, records what it received, and can be told to fail.
package fakeopenai

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"sync"
	"time"
)

// CacheBlock is the block size of the simulated prefix cache.
const CacheBlock = 16

// Received is what the server saw of one generation request.
type Received struct {
	Path         string
	Auth         string
	Model        string
	PromptTokens []int
	PromptText   string
	Messages     []map[string]string
	MaxTokens    int
	IgnoreEOS    bool
	HasStop      bool
	IncludeUsage bool
	ExtraFields  map[string]json.RawMessage
}

// Server is the fake. Set the exported fields before serving.
type Server struct {
	Model string
	// TokenDelay is slept between chunks.
	TokenDelay time.Duration
	// NoUsage omits the usage chunk so clients must count chunks.
	NoUsage bool
	// Fail, when set, picks requests (by 1-based arrival number) to answer
	// with HTTP 500.
	Fail func(n int) bool
	// NotSSE answers generation requests with a plain JSON body.
	NotSSE bool
	// Block, when non-nil, is waited on before streaming (to hold requests
	// in flight).
	Block chan struct{}

	mu       sync.Mutex
	n        int
	seen     map[uint64]bool
	received []Received
}

// New returns a fake serving model.
func New(model string) *Server {
	return &Server{Model: model, seen: map[uint64]bool{}}
}

// Received returns a copy of the requests seen so far.
func (s *Server) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, s.Model)
	case r.Method == http.MethodPost && (r.URL.Path == "/v1/completions" || r.URL.Path == "/v1/chat/completions"):
		s.generate(w, r)
	default:
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
	}
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	rec := Received{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), ExtraFields: map[string]json.RawMessage{}}
	known := map[string]any{
		"model": &rec.Model, "max_tokens": &rec.MaxTokens, "ignore_eos": &rec.IgnoreEOS,
		"messages": &rec.Messages,
	}
	for k, v := range raw {
		switch k {
		case "prompt":
			if json.Unmarshal(v, &rec.PromptTokens) != nil {
				_ = json.Unmarshal(v, &rec.PromptText)
			}
		case "stream_options":
			var o struct {
				IncludeUsage bool `json:"include_usage"`
			}
			_ = json.Unmarshal(v, &o)
			rec.IncludeUsage = o.IncludeUsage
		case "stop":
			rec.HasStop = true
		case "stream":
		default:
			if p, ok := known[k]; ok {
				_ = json.Unmarshal(v, p)
			} else {
				rec.ExtraFields[k] = v
			}
		}
	}
	s.mu.Lock()
	s.n++
	n := s.n
	cached := s.cache(rec.PromptTokens)
	s.received = append(s.received, rec)
	s.mu.Unlock()

	if s.Fail != nil && s.Fail(n) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"injected failure","type":"server_error"}}`)
		return
	}
	if s.NotSSE {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>hello</html>")
		return
	}
	if s.Block != nil {
		select {
		case <-s.Block:
		case <-r.Context().Done():
			return
		}
	}
	s.stream(w, r, rec, cached)
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, rec Received, cached int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	chat := strings.HasSuffix(rec.Path, "/chat/completions")
	for i := range rec.MaxTokens {
		if s.TokenDelay > 0 {
			select {
			case <-time.After(s.TokenDelay):
			case <-r.Context().Done():
				return
			}
		}
		if chat {
			fmt.Fprintf(w, "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" w%d\"},\"finish_reason\":null}]}\n\n", i)
		} else {
			fmt.Fprintf(w, "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\" w%d\",\"finish_reason\":null}]}\n\n", i)
		}
		if fl != nil {
			fl.Flush()
		}
	}
	prompt := len(rec.PromptTokens)
	if prompt == 0 {
		prompt = len(strings.Fields(rec.PromptText))
		for _, m := range rec.Messages {
			prompt += len(strings.Fields(m["content"]))
		}
	}
	if rec.IncludeUsage && !s.NoUsage {
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}}\n\n",
			prompt, rec.MaxTokens, prompt+rec.MaxTokens, cached)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// cache returns how many leading tokens of p were seen before, in whole
// CacheBlock blocks, and remembers p's blocks. Callers hold s.mu.
func (s *Server) cache(p []int) int {
	h := fnv.New64a()
	hit, missed := 0, false
	var buf [8]byte
	for i := 0; i+CacheBlock <= len(p); i += CacheBlock {
		for _, t := range p[i : i+CacheBlock] {
			for j := range buf {
				buf[j] = byte(t >> (8 * j))
			}
			h.Write(buf[:])
		}
		k := h.Sum64()
		if s.seen[k] && !missed {
			hit += CacheBlock
		} else {
			missed = true
		}
		s.seen[k] = true
	}
	return hit
}
