package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type ev struct{ typ, data string }

func readAll(t testing.TB, r io.Reader) ([]ev, error) {
	t.Helper()
	sr := NewReader(r)
	var out []ev
	for {
		e, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev{string(e.Type), string(e.Data)})
	}
}

func TestReader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []ev
	}{
		{
			name: "openai stream",
			in:   "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n",
			want: []ev{{"", `{"a":1}`}, {"", `{"a":2}`}, {"", "[DONE]"}},
		},
		{name: "crlf", in: "data: x\r\n\r\ndata: y\r\n\r\n", want: []ev{{"", "x"}, {"", "y"}}},
		{name: "multi-line data", in: "data: a\ndata: b\n\n", want: []ev{{"", "a\nb"}}},
		{name: "no space after colon", in: "data:x\n\n", want: []ev{{"", "x"}}},
		{name: "two spaces keeps one", in: "data:  x\n\n", want: []ev{{"", " x"}}},
		{name: "comments and retry", in: ": keepalive\nretry: 10\nid: 4\ndata: x\n\n", want: []ev{{"", "x"}}},
		{name: "named event", in: "event: error\ndata: boom\n\ndata: ok\n\n", want: []ev{{"error", "boom"}, {"", "ok"}}},
		{name: "event without data is dropped", in: "event: ping\n\ndata: x\n\n", want: []ev{{"", "x"}}},
		{name: "final event without blank line", in: "data: a\n\ndata: [DONE]", want: []ev{{"", "a"}, {"", "[DONE]"}}},
		{name: "empty data field", in: "data\n\n", want: []ev{{"", ""}}},
		{name: "empty stream", in: "", want: nil},
		{name: "blank lines only", in: "\n\n\n", want: nil},
		{name: "not sse", in: "<html>nope</html>", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []string{"whole", "one byte"} {
				var r io.Reader = strings.NewReader(tt.in)
				if mode == "one byte" {
					r = iotest.OneByteReader(r)
				}
				got, err := readAll(t, r)
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("%s: got %q, want %q", mode, got, tt.want)
				}
				for i := range got {
					if got[i] != tt.want[i] {
						t.Fatalf("%s: event %d = %q, want %q", mode, i, got[i], tt.want[i])
					}
				}
			}
		})
	}
}

func TestReaderLongLine(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 100<<10)
	got, err := readAll(t, strings.NewReader("data: "+big+"\n\ndata: y\n\n"))
	if err != nil || len(got) != 2 || got[0].data != big || got[1].data != "y" {
		t.Fatalf("long line: %d events, err %v", len(got), err)
	}
}

func TestReaderLineTooLong(t *testing.T) {
	t.Parallel()
	r := io.MultiReader(strings.NewReader("data: "), io.LimitReader(zeros{}, 1<<20))
	sr := NewReader(r)
	sr.maxLine = 256 << 10
	_, err := sr.Next()
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want ErrLineTooLong", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func TestReaderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(boom))
	got, err := readAll(t, r)
	if !errors.Is(err, boom) || len(got) != 1 {
		t.Fatalf("got %v, err %v; want one event then boom", got, err)
	}
}

func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		"event: e\r\ndata: x\r\n\r\n",
		": c\ndata\ndata:\n\n",
		"data: a",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, err1 := readAll(t, bytes.NewReader(in))
		split, err2 := readAll(t, iotest.HalfReader(bytes.NewReader(in)))
		if (err1 == nil) != (err2 == nil) || len(whole) != len(split) {
			t.Fatalf("chunking changed the result: %q/%v vs %q/%v", whole, err1, split, err2)
		}
		for i := range whole {
			if whole[i] != split[i] {
				t.Fatalf("event %d differs: %q vs %q", i, whole[i], split[i])
			}
			if strings.ContainsAny(whole[i].typ, "\n") {
				t.Fatalf("event type contains a newline: %q", whole[i].typ)
			}
		}
		if len(whole) > bytes.Count(in, []byte("data"))+1 {
			t.Fatalf("%d events from %d data fields", len(whole), bytes.Count(in, []byte("data")))
		}
	})
}

func BenchmarkReader(b *testing.B) {
	const events = 1000
	var buf bytes.Buffer
	chunk := `data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	for range events {
		buf.WriteString(chunk)
	}
	buf.WriteString("data: [DONE]\n\n")
	in := buf.Bytes()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	rd := bytes.NewReader(in)
	for b.Loop() {
		rd.Reset(in)
		r := NewReader(rd)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(events+1)), "ns/event")
}
