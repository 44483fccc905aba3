package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/services/frontend/internal/openai"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// scriptEntry is the fake workers' logprob entry for the token at
// sequence position p, with top alternatives, as the API returns it.
func scriptEntry(p, top int) openai.TokenLogprob {
	alt := func(id uint32, lp float32) openai.TopLogprob {
		b := byte(id - 3)
		return openai.TopLogprob{Token: tokenText([]byte{b}), Bytes: []int{int(b)}, Logprob: lp}
	}
	e := openai.TokenLogprob{TopLogprobs: []openai.TopLogprob{}}
	first := alt(upstreamtest.ScriptToken(p), upstreamtest.Logprob(p))
	e.Token, e.Bytes, e.Logprob = first.Token, first.Bytes, first.Logprob
	for _, t := range upstreamtest.TopLogprobs(p, top) {
		e.TopLogprobs = append(e.TopLogprobs, alt(t.GetTokenId(), t.GetLogprob()))
	}
	return e
}

// checkChatEntries checks n entries of a generation after a prompt of
// promptLen tokens.
func checkChatEntries(t *testing.T, got []openai.TokenLogprob, promptLen, n, top int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%d entries, want %d", len(got), n)
	}
	for k, e := range got {
		if w := scriptEntry(promptLen+k, top); !equalJSON(e, w) {
			t.Fatalf("entry %d = %+v, want %+v", k, e, w)
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func entryBytes(es []openai.TokenLogprob) []byte {
	var out []byte
	for _, e := range es {
		for _, b := range e.Bytes {
			out = append(out, byte(b))
		}
	}
	return out
}

func body(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d %s %v", resp.StatusCode, b, err)
	}
	return b
}

func TestChatLogprobs(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Batch: 4}}})
	tests := []struct {
		name  string
		extra string
		top   int
		json  string // in the body
	}{
		{name: "off", extra: `"logprobs":false`, top: -1, json: `"logprobs":null`},
		{name: "no top", extra: `"logprobs":true`, json: `"top_logprobs":[]`},
		{name: "top 3", extra: `"logprobs":true,"top_logprobs":3`, top: 3, json: `"refusal":null`},
		{name: "top 20", extra: `"logprobs":true,"top_logprobs":20`, top: 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := body(t, s.post(t, "/v1/chat/completions", chatBody(`"max_tokens":30,`+tc.extra)))
			if !strings.Contains(string(b), tc.json) {
				t.Fatalf("body lacks %s: %s", tc.json, b)
			}
			var got openai.ChatCompletion
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			lp := got.Choices[0].Logprobs
			if tc.top < 0 {
				if lp != nil {
					t.Fatalf("logprobs %+v without asking", lp)
				}
				return
			}
			checkChatEntries(t, lp.Content, chatPromptLen, 30, tc.top)
			if string(entryBytes(lp.Content)) != got.Choices[0].Message.Content {
				t.Fatalf("token bytes %q != content %q", entryBytes(lp.Content), got.Choices[0].Message.Content)
			}
		})
	}
}

// Each chunk carries the entries of the tokens that arrived with its
// text; tokens that brought no text (half a character) ride with the next
// chunk. So the entries so far spell the text so far, plus at most the
// start of a character.
func TestChatLogprobsStream(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{1, 3} {
		t.Run("batch "+strconv.Itoa(batch), func(t *testing.T) {
			t.Parallel()
			s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Batch: batch}}})
			// 70 tokens cross "Ünal" and "✓".
			resp := s.post(t, "/v1/chat/completions", chatBody(`"max_tokens":70,"stream":true,"logprobs":true,"top_logprobs":2`))
			evs := events(t, resp.Body)
			var text strings.Builder
			var all []openai.TokenLogprob
			for i, e := range evs[:len(evs)-1] {
				var ch openai.ChatChunk
				if err := json.Unmarshal([]byte(e), &ch); err != nil {
					t.Fatal(err)
				}
				c := ch.Choices[0]
				if i == 0 && c.Logprobs != nil || c.Logprobs != nil && c.Logprobs.Refusal != nil {
					t.Fatalf("chunk %d: %s", i, e)
				}
				if c.Delta.Content != nil {
					text.WriteString(*c.Delta.Content)
				}
				if c.Logprobs != nil {
					all = append(all, c.Logprobs.Content...)
				}
				if spelt := string(entryBytes(all)); !strings.HasPrefix(spelt, text.String()) || len(spelt) > len(text.String())+3 {
					t.Fatalf("after chunk %d: entries spell %q, text is %q", i, entryBytes(all), text.String())
				}
			}
			checkChatEntries(t, all, chatPromptLen, 70, 2)
		})
	}
}

// completionWant is the completions logprobs object of n tokens after a
// prompt of promptLen, with top alternatives; text_offset counts the
// characters that start before each token.
func completionWant(promptLen, n, top int) openai.CompletionLogprobs {
	w := openai.CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float32{}, TopLogprobs: []openai.LogprobMap{}, TextOffset: []int{}}
	chars := 0
	for k := range n {
		e := scriptEntry(promptLen+k, top)
		w.Tokens = append(w.Tokens, e.Token)
		w.TokenLogprobs = append(w.TokenLogprobs, e.Logprob)
		m := openai.LogprobMap{}
		for _, a := range e.TopLogprobs {
			m = append(m, openai.TokenValue{Token: a.Token, Logprob: a.Logprob})
		}
		if top == 0 { // the sampled token alone
			m = append(m, openai.TokenValue{Token: e.Token, Logprob: e.Logprob})
		}
		w.TopLogprobs = append(w.TopLogprobs, m)
		w.TextOffset = append(w.TextOffset, chars)
		if e.Bytes[0]&0xC0 != 0x80 {
			chars++
		}
	}
	return w
}

func TestCompletionLogprobs(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Batch: 5}}})
	// Prompt "Hello" is 6 tokens; 80 tokens cross "Ünal" and "✓".
	for _, top := range []int{0, 1, 5} {
		t.Run("logprobs "+strconv.Itoa(top), func(t *testing.T) {
			t.Parallel()
			req := `{"model":"tiny","prompt":"Hello","max_tokens":80,"logprobs":` + strconv.Itoa(top)
			b := body(t, s.post(t, "/v1/completions", req+`}`))
			if top == 0 && !strings.Contains(string(b), `"top_logprobs":[{"p":-3},{"o":-3.5},`) {
				t.Fatalf("logprobs=0: top_logprobs do not hold the sampled tokens alone: %s", b)
			}
			var got openai.Completion
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			want := completionWant(6, 80, top)
			if !equalJSON(got.Choices[0].Logprobs, want) {
				t.Fatalf("logprobs\n got %+v\nwant %+v", got.Choices[0].Logprobs, want)
			}
			// Offsets point into the returned text.
			runes := []rune(got.Choices[0].Text)
			for k, off := range want.TextOffset {
				if tok := want.Tokens[k]; tok != "\uFFFD" && string(runes[off]) != tok {
					t.Fatalf("token %d %q at offset %d, text has %q", k, tok, off, string(runes[off]))
				}
			}

			resp := s.post(t, "/v1/completions", req+`,"stream":true}`)
			var acc openai.CompletionLogprobs
			evs := events(t, resp.Body)
			for _, e := range evs[:len(evs)-1] {
				var ch openai.Completion
				if err := json.Unmarshal([]byte(e), &ch); err != nil {
					t.Fatal(err)
				}
				if lp := ch.Choices[0].Logprobs; lp != nil {
					acc.Tokens = append(acc.Tokens, lp.Tokens...)
					acc.TokenLogprobs = append(acc.TokenLogprobs, lp.TokenLogprobs...)
					acc.TopLogprobs = append(acc.TopLogprobs, lp.TopLogprobs...)
					acc.TextOffset = append(acc.TextOffset, lp.TextOffset...)
				}
			}
			if !equalJSON(acc, want) {
				t.Fatalf("streamed logprobs\n got %+v\nwant %+v", acc, want)
			}
		})
	}
}

func TestCompletionWithoutLogprobs(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	for _, extra := range []string{``, `,"logprobs":null`, `,"stream":true`} {
		b := body(t, s.post(t, "/v1/completions", `{"model":"tiny","prompt":"Hello","max_tokens":3`+extra+`}`))
		if !strings.Contains(string(b), `"logprobs":null`) || strings.Contains(string(b), `"tokens"`) {
			t.Fatalf("%s: %s", extra, b)
		}
		if reqs := s.Workers[0].Requests(); reqs[len(reqs)-1].GetSampling().GetLogprobs() {
			t.Fatalf("%s: worker asked for logprobs", extra)
		}
	}
}

// A stop string found inside a worker message of 8 tokens ends the
// entries at the token that completed it, beyond the text it cut.
func TestLogprobsStopString(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Batch: 8}}})
	// Output after "Hello" is "pon a time, ...": "time" ends at token 10.
	const req = `{"model":"tiny","prompt":"Hello","max_tokens":40,"stop":"time","logprobs":1`
	var got openai.Completion
	if err := json.Unmarshal(body(t, s.post(t, "/v1/completions", req+`}`)), &got); err != nil {
		t.Fatal(err)
	}
	want := completionWant(6, 10, 1)
	if c := got.Choices[0]; c.Text != "pon a " || *c.FinishReason != "stop" || !equalJSON(c.Logprobs, want) || got.Usage.CompletionTokens != 10 {
		t.Fatalf("got %q %+v usage %+v", c.Text, c.Logprobs, got.Usage)
	}
	evs := events(t, s.post(t, "/v1/completions", req+`,"stream":true}`).Body)
	var tokens []string
	for _, e := range evs[:len(evs)-1] {
		var ch openai.Completion
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatal(err)
		}
		if lp := ch.Choices[0].Logprobs; lp != nil {
			tokens = append(tokens, lp.Tokens...)
		}
	}
	if !slices.Equal(tokens, want.Tokens) {
		t.Fatalf("streamed tokens %q, want %q", tokens, want.Tokens)
	}

	// The chat output is "little fox ...": a stop string at its start
	// leaves no text, and the entries come with the finish chunk.
	var chat openai.ChatCompletion
	if err := json.Unmarshal(body(t, s.post(t, "/v1/chat/completions", chatBody(`"stop":"little","logprobs":true`))), &chat); err != nil {
		t.Fatal(err)
	}
	if c := chat.Choices[0]; c.Message.Content != "" || c.FinishReason != "stop" {
		t.Fatalf("chat got %+v", c)
	} else {
		checkChatEntries(t, c.Logprobs.Content, chatPromptLen, len("little"), 0)
	}
	evs = events(t, s.post(t, "/v1/chat/completions", chatBody(`"stop":"little","logprobs":true,"stream":true`)).Body)
	var last openai.ChatChunk
	if err := json.Unmarshal([]byte(evs[len(evs)-2]), &last); err != nil {
		t.Fatal(err)
	}
	if c := last.Choices[0]; c.FinishReason == nil || *c.FinishReason != "stop" || c.Logprobs == nil {
		t.Fatalf("finish chunk %s", evs[len(evs)-2])
	} else {
		checkChatEntries(t, c.Logprobs.Content, chatPromptLen, len("little"), 0)
	}
}

func TestLogprobsErrors(t *testing.T) {
	t.Parallel()
	const inv = openai.TypeInvalidRequest
	sim := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "sim", NoLogprobs: true}}})
	old := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "old", IgnoreLogprobs: true}}})
	chat, cmpl := "/v1/chat/completions", "/v1/completions"
	tests := []struct {
		errCase
		s *stack
	}{
		{errCase{name: "top_logprobs 21", path: chat, body: chatBody(`"logprobs":true,"top_logprobs":21`), status: 400, typ: inv, param: "top_logprobs"}, sim},
		{errCase{name: "sim chat", path: chat, body: chatBody(`"logprobs":true`), status: 400, typ: inv, param: "logprobs"}, sim},
		{errCase{name: "sim chat stream", path: chat, body: chatBody(`"logprobs":true,"stream":true`), status: 400, typ: inv, param: "logprobs"}, sim},
		{errCase{name: "sim completion", path: cmpl, body: `{"model":"tiny","prompt":"x","logprobs":0}`, status: 400, typ: inv, param: "logprobs"}, sim},
		{errCase{name: "sim completion stream", path: cmpl, body: `{"model":"tiny","prompt":"x","logprobs":2,"stream":true}`, status: 400, typ: inv, param: "logprobs"}, sim},
		{errCase{name: "worker without logprobs", path: chat, body: chatBody(`"logprobs":true`), status: 502, typ: openai.TypeServer}, old},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkError(t, tc.s.post(t, tc.path, tc.body), tc.errCase)
		})
	}
	// Without logprobs the sim serves as before.
	if resp := sim.post(t, chat, chatBody(`"max_tokens":2`)); resp.StatusCode != http.StatusOK {
		t.Fatalf("sim without logprobs: status %d", resp.StatusCode)
	}
}

func TestTextOffsets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		pieces []string
		want   []int
	}{
		{name: "ascii", pieces: []string{"Once", " upon", "", " a"}, want: []int{0, 4, 9, 9}},
		// "Ü" split: the character counts at its first byte's token.
		{name: "split character", pieces: []string{"\xc3", "\x9c", "nal", "\xe2", "\x9c", "\x93", "!"}, want: []int{0, 1, 1, 4, 5, 5, 5}},
		{name: "whole characters", pieces: []string{"Ü", "✓x", "y"}, want: []int{0, 1, 3}},
		// Bytes that are no UTF-8 count as one character each.
		{name: "stray bytes", pieces: []string{"\xff", "\xc3", "a", "\x9c"}, want: []int{0, 1, 2, 3}},
		// A character cut short: two U+FFFD, then "AB".
		{name: "cut character", pieces: []string{"\xe2", "\x9c", "A", "B"}, want: []int{0, 1, 2, 3}},
	}
	for _, tc := range tests {
		var o textOffsets
		var got []int
		for _, p := range tc.pieces {
			got = append(got, o.next([]byte(p)))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: offsets %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTextOffsetsMatchText: with one byte a token, each token's offset
// points at its own character in the text TextStream makes, malformed
// bytes included (each is one U+FFFD there too).
func TestTextOffsetsMatchText(t *testing.T) {
	t.Parallel()
	tok, err := tokenizer.NewBytes(300)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"\xe2\x9cAB", "a\xffb\xc3", "Ü\xe2\x9c\x93\x9c!", "\xf0\x9f\x99x"} {
		ts := tokenizer.NewTextStream(tok, tokenizer.BOS, nil)
		var o textOffsets
		var out strings.Builder
		var offs []int
		for _, id := range tok.Encode(text, false, false) {
			offs = append(offs, o.next(tok.Piece(tokenizer.BOS, id)))
			s, _ := ts.Push(id)
			out.WriteString(s)
		}
		out.WriteString(ts.Flush())
		runes := []rune(out.String())
		for i, c := range []byte(text) {
			if c < utf8.RuneSelf && (offs[i] >= len(runes) || runes[offs[i]] != rune(c)) {
				t.Errorf("%q: byte %d (%q) at offset %d of %q", text, i, c, offs[i], out.String())
			}
		}
	}
}

func TestTokenTextAndFinite(t *testing.T) {
	t.Parallel()
	if got := tokenText([]byte("a\xc3\x9c\xe2\x9cb")); got != "aÜ\uFFFD\uFFFDb" {
		t.Errorf("tokenText %q", got)
	}
	if b := byteList(nil); b == nil || len(b) != 0 {
		t.Errorf("byteList(nil) = %v, want []", b)
	}
	for in, want := range map[float32]float32{-0.5: -0.5, 0: 0, float32(math.Inf(-1)): -9999, float32(math.NaN()): -9999, -1e6: -9999} {
		if got := finite(in); got != want {
			t.Errorf("finite(%v) = %v, want %v", in, got, want)
		}
	}
}
