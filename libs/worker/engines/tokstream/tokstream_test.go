package tokstream

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/engine/tokenizer"
)

func model(t *testing.T) Model {
	t.Helper()
	tok, err := tokenizer.NewBytes(300)
	if err != nil {
		t.Fatal(err)
	}
	return Model{Tokenizer: tok, StopTokens: []uint32{tok.EOS(), tok.BOS()}, VocabSize: 300, ContextLen: 16}
}

// ids are the byte tokenizer's tokens for s.
func ids(s string) []uint32 {
	out := make([]uint32, len(s))
	for i := range len(s) {
		out[i] = uint32(s[i]) + tokenizer.ByteOffset
	}
	return out
}

// drain feeds tokens until the stream stops taking them, ends it, and
// returns what a reader gets.
func drain(t *testing.T, s *Stream, tokens []uint32) (got []uint32, text string, last engine.Output) {
	t.Helper()
	for _, tok := range tokens {
		if !s.Token(tok) {
			break
		}
	}
	s.End(engine.FinishStop, nil)
	for {
		o, err := s.Recv(t.Context())
		if errors.Is(err, io.EOF) {
			return got, text, last
		}
		if err != nil {
			t.Fatal(err)
		}
		got, text, last = append(got, o.TokenIDs...), text+o.Text, o
	}
}

func TestStopsAsTheBuiltinEngine(t *testing.T) {
	t.Parallel()
	m := model(t)
	prompt := ids("ab")
	eos := m.Tokenizer.EOS()
	for _, tc := range []struct {
		name      string
		stop      engine.StopParams
		feed      []uint32
		tokens    []uint32
		text      string
		finish    engine.FinishReason
		generated int
	}{
		{"max tokens", engine.StopParams{MaxTokens: 3}, ids("xyzw"), ids("xyz"), "xyz", engine.FinishLength, 3},
		{"eos is not emitted but counted", engine.StopParams{MaxTokens: 9}, append(ids("xy"), eos, 300), ids("xy"), "xy", engine.FinishStop, 3},
		{"ignore eos", engine.StopParams{MaxTokens: 3, IgnoreEOS: true}, append(ids("x"), eos, eos), []uint32{ids("x")[0], eos, eos}, "x", engine.FinishLength, 3},
		{"stop token", engine.StopParams{MaxTokens: 9, StopTokenIDs: ids("z")}, ids("xyzw"), ids("xy"), "xy", engine.FinishStop, 3},
		{"stop string", engine.StopParams{MaxTokens: 9, StopStrings: []string{"yz"}}, ids("xyzw"), ids("xyz"), "x", engine.FinishStop, 3},
		{"the context fills", engine.StopParams{MaxTokens: 100}, ids("0123456789abcdefgh"), ids("0123456789abcd"), "0123456789abcd", engine.FinishLength, 14},
	} {
		r := engine.Request{Prompt: prompt, Stop: tc.stop}
		if err := Validate(m, r); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		s := New(m, r, func() {})
		got, text, last := drain(t, s, tc.feed)
		if !slices.Equal(got, tc.tokens) || text != tc.text || last.Finish != tc.finish || last.Usage.CompletionTokens != tc.generated || last.Usage.PromptTokens != 2 {
			t.Errorf("%s: tokens %v text %q finish %s usage %+v; want %v %q %s %d", tc.name, got, text, last.Finish, last.Usage, tc.tokens, tc.text, tc.finish, tc.generated)
		}
	}
}

// A stream that ended here shows its final output only once the adapter
// calls End, with the usage known by then.
func TestFinalOutputWaitsForEnd(t *testing.T) {
	t.Parallel()
	m := model(t)
	s := New(m, engine.Request{Prompt: ids("a"), Stop: engine.StopParams{MaxTokens: 1}}, func() {})
	s.SetCached(1)
	if s.Token(ids("b")[0]) {
		t.Fatal("took a token past max tokens")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Recv(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv before End: %v; want nothing queued", err)
	}
	s.End(engine.FinishError, errors.New("ignored: the stream had ended"))
	o, err := s.Recv(ctx)
	if err != nil || o.Finish != engine.FinishLength || o.Usage.CachedPromptTokens != 1 || len(o.TokenIDs) != 1 {
		t.Fatalf("final %+v, %v", o, err)
	}
	if _, err := s.Recv(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after the final output: %v; want EOF", err)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	cancelled := false
	s := New(model(t), engine.Request{Prompt: ids("a"), Stop: engine.StopParams{MaxTokens: 9}}, func() { cancelled = true })
	s.Token(ids("b")[0])
	s.Cancel()
	var last engine.Output
	for {
		o, err := s.Recv(t.Context())
		if err != nil {
			break
		}
		last = o
	}
	if !cancelled || last.Finish != engine.FinishCancelled || s.Token(1) {
		t.Fatalf("cancelled %v, last %+v", cancelled, last)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	m := model(t)
	first := uint32(5)
	for _, tc := range []struct {
		r     engine.Request
		field string
	}{
		{engine.Request{Stop: engine.StopParams{MaxTokens: 1}}, "token_ids"},
		{engine.Request{Prompt: make([]uint32, 16), Stop: engine.StopParams{MaxTokens: 1}}, "token_ids"},
		{engine.Request{Prompt: []uint32{300}, Stop: engine.StopParams{MaxTokens: 1}}, "token_ids"},
		{engine.Request{Prompt: []uint32{1}}, "stop.max_tokens"},
		{engine.Request{Prompt: []uint32{1}, Stop: engine.StopParams{MaxTokens: 1, StopStrings: []string{""}}}, "stop.stop"},
		{engine.Request{Prompt: []uint32{1}, Stop: engine.StopParams{MaxTokens: 1, StopTokenIDs: []uint32{999}}}, "stop.stop_token_ids"},
		{engine.Request{Prompt: []uint32{1}, Stop: engine.StopParams{MaxTokens: 1}, FirstToken: &first}, "first_token"},
		{engine.Request{Prompt: []uint32{1}, Stop: engine.StopParams{MaxTokens: 1}, Sampling: sample.Params{Temperature: -1}}, "sampling"},
	} {
		err := Validate(m, tc.r)
		if !errors.Is(err, engine.ErrInvalidRequest) || engine.InvalidField(err) != tc.field {
			t.Errorf("%+v: %v (field %q); want an invalid request about %q", tc.r, err, engine.InvalidField(err), tc.field)
		}
	}
}
