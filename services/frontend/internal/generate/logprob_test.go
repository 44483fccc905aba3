package generate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// logprobRun collects the deltas of a generation asking for logprobs.
type logprobRun struct {
	run
	ids []uint32
	lps []Logprob
}

func generateLogprobs(t *testing.T, g *Generator, req Request, top uint32) logprobRun {
	t.Helper()
	req.Sampling = &commonv1.SamplingParams{Logprobs: true, TopLogprobs: top}
	var r logprobRun
	var text []byte
	r.res, r.err = g.Run(t.Context(), req, func(d Delta) error {
		if len(d.Logprobs) != len(d.TokenIDs) {
			t.Errorf("delta has %d logprob entries for %d tokens", len(d.Logprobs), len(d.TokenIDs))
		}
		for i, lp := range d.Logprobs {
			if lp.Token.ID != d.TokenIDs[i] {
				t.Errorf("entry for token %d in the place of %d", lp.Token.ID, d.TokenIDs[i])
			}
		}
		text = append(text, d.Text...)
		r.ids = append(r.ids, d.TokenIDs...)
		r.lps = append(r.lps, d.Logprobs...)
		r.deltas++
		return nil
	})
	r.text = string(text)
	return r
}

// checkScript checks that entry k is the fake worker's for the k-th token
// after a 3-token prompt.
func checkScript(t *testing.T, lps []Logprob, top int) {
	t.Helper()
	for k, lp := range lps {
		p := 3 + k
		want := upstreamtest.ScriptToken(p)
		if lp.Token.ID != want || lp.Token.Logprob != upstreamtest.Logprob(p) || !bytes.Equal(lp.Token.Bytes, []byte{upstreamtest.Script[p%len(upstreamtest.Script)]}) {
			t.Fatalf("entry %d = %+v, want token %d logprob %v", k, lp.Token, want, upstreamtest.Logprob(p))
		}
		if len(lp.Top) != top {
			t.Fatalf("entry %d has %d top entries, want %d", k, len(lp.Top), top)
		}
		for j, alt := range lp.Top {
			w := upstreamtest.TopLogprobs(p, top)[j]
			if alt.ID != w.GetTokenId() || alt.Logprob != w.GetLogprob() || !bytes.Equal(alt.Bytes, []byte{byte(w.GetTokenId() - tokenizer.ByteOffset)}) {
				t.Fatalf("entry %d top %d = %+v, want %v", k, j, alt, w)
			}
		}
	}
}

func TestLogprobs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		workers []upstreamtest.WorkerConfig
		stop    []string
		top     uint32
		tokens  int // entries, and tokens generated
		text    string
		migrate int
	}{
		{name: "one token a message", workers: []upstreamtest.WorkerConfig{{ID: "a"}}, top: 2, tokens: 30, text: want(30)},
		{name: "batches", workers: []upstreamtest.WorkerConfig{{ID: "a", Batch: 7}}, top: 20, tokens: 30, text: want(30)},
		{name: "no top", workers: []upstreamtest.WorkerConfig{{ID: "a", Batch: 4}}, tokens: 30, text: want(30)},
		// Output "e upon a time, ...": the stop string ends at the 13th
		// token, inside the second message of 8.
		{name: "stop cuts a message", workers: []upstreamtest.WorkerConfig{{ID: "a", Batch: 8}}, stop: []string{"time"}, top: 1, tokens: 13, text: "e upon a "},
		{name: "migration", workers: []upstreamtest.WorkerConfig{{ID: "a", DieAfter: 11, Batch: 3, Abort: true}, {ID: "b", Batch: 5}}, top: 3, tokens: 30, text: want(30), migrate: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ws []*upstreamtest.Worker
			for _, c := range tc.workers {
				ws = append(ws, upstreamtest.StartWorker(t, c))
			}
			g, _ := newGen(t, 3, ws...)
			r := generateLogprobs(t, g, request(t, 30, tc.stop...), tc.top)
			if r.err != nil || r.text != tc.text || len(r.lps) != tc.tokens || r.res.CompletionTokens != tc.tokens || r.res.Migrations != tc.migrate {
				t.Fatalf("got %q, %d entries, %+v, %v", r.text, len(r.lps), r.res, r.err)
			}
			checkScript(t, r.lps, int(tc.top))
		})
	}
}

func TestLogprobsMissing(t *testing.T) {
	t.Parallel()
	old := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a", IgnoreLogprobs: true})
	g, router := newGen(t, 3, old, upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "b"}))
	r := generateLogprobs(t, g, request(t, 10), 0)
	if !errors.Is(r.err, ErrWorkerContract) || r.deltas != 0 || len(router.Routes()) != 1 {
		t.Fatalf("err %v, %d deltas, %d routes", r.err, r.deltas, len(router.Routes()))
	}
}

// buildBPE writes a llama2.c tokenizer.bin image of pieces.
func buildBPE(pieces []string) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, int32(8))
	for _, p := range pieces {
		_ = binary.Write(&b, binary.LittleEndian, math.Float32bits(0))
		_ = binary.Write(&b, binary.LittleEndian, int32(len(p)))
		b.WriteString(p)
	}
	return b.Bytes()
}

// A token's bytes are what it adds to the text where it stands: llama2.c
// drops a piece's leading space right after BOS, and only there, for the
// sampled token and its alternatives alike.
func TestLogprobBytesFollowTheText(t *testing.T) {
	t.Parallel()
	pieces := []string{"<unk>", "\n<s>\n", "\n</s>\n"}
	for b := range 256 {
		pieces = append(pieces, "<0x"+string("0123456789ABCDEF"[b>>4])+string("0123456789ABCDEF"[b&15])+">")
	}
	pieces = append(pieces, " Once", "Once", " upon")
	tok, err := tokenizer.ParseBPE(buildBPE(pieces), len(pieces))
	if err != nil {
		t.Fatal(err)
	}
	once, bare, upon := uint32(259), uint32(260), uint32(261)
	st := &state{req: Request{Prompt: []uint32{tokenizer.BOS}, Tokenizer: tok}}
	entry := &workerv1.TokenLogprob{Logprob: -0.1, Top: []*workerv1.TopLogprob{{TokenId: once, Logprob: -0.1}, {TokenId: upon, Logprob: -3}, {TokenId: tokenizer.ByteOffset + 0xC3, Logprob: -4}}}
	tests := []struct {
		name      string
		generated []uint32
		id        uint32
		want      []string // the token, then its alternatives
	}{
		{name: "after BOS", id: once, want: []string{"Once", "Once", "upon", "\xc3"}},
		{name: "after a token", generated: []uint32{bare}, id: upon, want: []string{" upon", " Once", " upon", "\xc3"}},
	}
	for _, tc := range tests {
		prev := tokenizer.BOS
		if n := len(tc.generated); n > 0 {
			prev = tc.generated[n-1]
		}
		lp := st.logprob(prev, tc.id, tok.Piece(prev, tc.id), entry)
		got := []string{string(lp.Token.Bytes)}
		for _, a := range lp.Top {
			got = append(got, string(a.Bytes))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
