package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/services/frontend/internal/chattmpl"
)

// Get returns model, fetching its info on first use. It fails with
// ErrUnknownModel when no worker serves it. Concurrent first uses fetch
// once; the others wait for it as long as their ctx allows.
func (c *Catalog) Get(ctx context.Context, model string) (*Model, error) {
	c.waitReady(ctx)
	e, err := c.entry(model)
	if err != nil {
		return nil, err
	}
	if m := e.model.Load(); m != nil {
		return m, nil
	}
	select {
	case e.fetching <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("catalog: %q: %w", model, ctx.Err())
	}
	defer func() { <-e.fetching }()
	if m := e.model.Load(); m != nil {
		return m, nil
	}
	m, err := c.fetch(ctx, model, e)
	if err != nil {
		c.forget(model, e)
		return nil, err
	}
	e.model.Store(m)
	return m, nil
}

// entry returns model's entry. Without discovery every name gets one on
// first use, to be looked up through the router; forget drops it again
// if that fails, so names nobody serves are not kept.
func (c *Catalog) entry(model string) (*entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.models[model]
	if ok {
		return e, nil
	}
	if c.cfg.Registry != nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownModel, model)
	}
	e = newEntry(nil, c.cfg.Now())
	c.models[model] = e
	return e, nil
}

// forget drops an entry made for a failed lookup (no discovery).
func (c *Catalog) forget(model string, e *entry) {
	if c.cfg.Registry != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.models[model] == e && e.model.Load() == nil {
		delete(c.models, model)
	}
}

func (c *Catalog) urls(ctx context.Context, model string, e *entry) ([]string, error) {
	if c.cfg.Registry != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		return append([]string(nil), e.urls...), nil
	}
	if c.cfg.Locate == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownModel, model)
	}
	u, err := c.cfg.Locate(ctx, model)
	if err != nil {
		if code := connect.CodeOf(err); code == connect.CodeNotFound || code == connect.CodeFailedPrecondition {
			return nil, fmt.Errorf("%w: %q: %w", ErrUnknownModel, model, err)
		}
		return nil, fmt.Errorf("catalog: locate %q: %w", model, err)
	}
	return []string{u}, nil
}

// fetch asks the model's workers in turn for its info.
// fetchTimeout bounds one model lookup (the router's Locate, each worker's
// GetModelInfo): the request that makes it has no deadline of its own yet,
// and every other first request for the model waits on it.
const fetchTimeout = 10 * time.Second

func (c *Catalog) fetch(ctx context.Context, model string, e *entry) (*Model, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	urls, err := c.urls(ctx, model, e)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, u := range urls {
		resp, err := c.cfg.Dialer.Worker(u).GetModelInfo(ctx, connect.NewRequest(&workerv1.GetModelInfoRequest{}))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		tok, err := Tokenizer(resp.Msg)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u, err))
			continue
		}
		c.cfg.Logger.InfoContext(ctx, "model resolved", "model", model, "worker", u, "vocab", resp.Msg.GetVocabSize(),
			"context", resp.Msg.GetContextLength(), "tokenizer", resp.Msg.GetTokenizerKind())
		m := &Model{Name: model, Info: resp.Msg, Tok: tok, Created: e.created}
		if src := resp.Msg.GetChatTemplate(); src != "" {
			m.Template = modelTemplate(ctx, c.cfg.Logger, model, src, tok)
		}
		return m, nil
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: %q has no workers", ErrUnknownModel, model)
	}
	return nil, fmt.Errorf("catalog: model info for %q: %w", model, errors.Join(errs...))
}

// modelTemplate compiles a model's own chat template, its bos_token and
// eos_token the texts of the tokenizer's BOS and EOS.
func modelTemplate(ctx context.Context, log *slog.Logger, model, src string, tok tokenizer.Tokenizer) chattmpl.Template {
	var bos, eos string
	if tt, ok := tok.(interface{ Token(uint32) string }); ok {
		bos, eos = tt.Token(tok.BOS()), tt.Token(tok.EOS())
	}
	t, err := chattmpl.Jinja(model+"'s chat template", src, bos, eos)
	if err != nil {
		log.ErrorContext(ctx, "the model's chat template does not compile; chat requests for it fail until -chat-template names one for it", "model", model, "err", err)
		err = fmt.Errorf("the model's own chat template does not compile (the operator can name another with -chat-template %s=FILE): %w", model, err)
		return func(chattmpl.Conversation) (string, error) { return "", err }
	}
	return t
}

// Tokenizer builds the tokenizer a worker described.
func Tokenizer(info *workerv1.GetModelInfoResponse) (tokenizer.Tokenizer, error) {
	switch kind := info.GetTokenizerKind(); {
	case kind == "llama2c" && len(info.GetTokenizer()) > 0:
		return tokenizer.ParseBPE(info.GetTokenizer(), int(info.GetVocabSize()))
	case kind == "vocab":
		var v tokenizer.Vocab
		if err := json.Unmarshal(info.GetTokenizer(), &v); err != nil {
			return nil, fmt.Errorf("catalog: tokenizer vocabulary: %w", err)
		}
		tok, err := tokenizer.NewVocab(v)
		if err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
		if tok.VocabSize() != int(info.GetVocabSize()) {
			return nil, fmt.Errorf("catalog: the tokenizer has %d tokens, the model %d", tok.VocabSize(), info.GetVocabSize())
		}
		return tok, nil
	case kind == "bytes" || kind == "" && len(info.GetTokenizer()) == 0:
		return tokenizer.NewBytes(int(info.GetVocabSize()))
	default:
		return nil, fmt.Errorf("catalog: tokenizer kind %q with %d bytes: unsupported", kind, len(info.GetTokenizer()))
	}
}

// MinTokens is a lower bound on len(m.Encode(text)) that costs nothing to
// compute: one token per MaxPieceBytes bytes of text; 0 when the
// tokenizer states no bound. BOS is not counted: run.c's encode merges it
// like any token, so it may share one with the text. A text whose bound
// is past the context cannot fit, and need not be encoded to say so.
func (m *Model) MinTokens(text string) int {
	if n := m.Tok.MaxPieceBytes(); n > 0 {
		return (len(text) + n - 1) / n
	}
	return 0
}

// Encode tokenizes prompt text the way the model wants it. A real
// model's vocabulary (a specialEncoder) reads the special tokens written
// in the text, as Hugging Face tokenizers and llama-server do for a
// prompt, so a chat template's markers become their ids, and it starts
// with BOS when the model wants one and the text did not name it. A
// llama2.c tokenizer has no special tokens: the worker's BOS id first,
// then the text (llama2.c encode with bos=true).
func (m *Model) Encode(text string) []uint32 {
	if st, ok := m.Tok.(specialEncoder); ok {
		ids := st.EncodeSpecial(text, false, false)
		if st.AddBOS() && (len(ids) == 0 || ids[0] != st.BOS()) {
			ids = append([]uint32{st.BOS()}, ids...)
		}
		return ids
	}
	if m.Info.GetBosTokenId() == m.Tok.BOS() {
		return m.Tok.Encode(text, true, false)
	}
	ids := m.Tok.Encode(text, false, false)
	return append([]uint32{m.Info.GetBosTokenId()}, ids...)
}

// specialEncoder is a tokenizer with special tokens
// (*tokenizer.VocabTokenizer).
type specialEncoder interface {
	EncodeSpecial(text string, bos, eos bool) []uint32
	AddBOS() bool
	BOS() uint32
}
