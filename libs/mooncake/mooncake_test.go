package mooncake

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard.dev/libs/sharedtest"
)

func TestParseLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		line    string
		want    Record
		wantErr string
	}{
		{
			name: "mooncake",
			line: `{"timestamp": 27, "input_length": 600, "output_length": 12, "hash_ids": [0, 1]}`,
			want: Record{TimestampMs: 27, InputLength: 600, OutputLength: 12, HashIDs: []int64{0, 1}},
		},
		{
			name: "extra fields and float timestamp",
			line: `{"timestamp": 1.5, "input_length": 1, "output_length": 1, "hash_ids": [9], "x": true}`,
			want: Record{TimestampMs: 1.5, InputLength: 1, OutputLength: 1, HashIDs: []int64{9}},
		},
		{name: "not json", line: `timestamp=1`, wantErr: "invalid character"},
		{name: "truncated", line: `{"timestamp": 1, "input_length"`, wantErr: "unexpected EOF"},
		{name: "trailing", line: `{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[1]} {}`, wantErr: "trailing data"},
		{name: "missing timestamp", line: `{"input_length": 1, "output_length": 1, "hash_ids": [1]}`, wantErr: "missing timestamp"},
		{name: "missing input", line: `{"timestamp": 0, "output_length": 1, "hash_ids": [1]}`, wantErr: "missing input_length"},
		{name: "missing output", line: `{"timestamp": 0, "input_length": 1, "hash_ids": [1]}`, wantErr: "missing output_length"},
		{name: "empty hash ids", line: `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []}`, wantErr: "hash_ids"},
		{name: "negative timestamp", line: `{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [1]}`, wantErr: "timestamp"},
		{name: "zero output", line: `{"timestamp": 0, "input_length": 1, "output_length": 0, "hash_ids": [1]}`, wantErr: "output_length 0"},
		{name: "too long", line: `{"timestamp": 0, "input_length": 1025, "output_length": 1, "hash_ids": [1, 2]}`, wantErr: "exceeds"},
		{name: "negative id", line: `{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1, -2]}`, wantErr: "negative hash id"},
		{name: "string length", line: `{"timestamp": 0, "input_length": "5", "output_length": 1, "hash_ids": [1]}`, wantErr: "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseLine([]byte(tt.line), 512)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrSyntax) {
					t.Fatalf("err = %v, want ErrSyntax containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.TimestampMs != tt.want.TimestampMs || got.InputLength != tt.want.InputLength ||
				got.OutputLength != tt.want.OutputLength || len(got.HashIDs) != len(tt.want.HashIDs) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadReportsFileAndLine(t *testing.T) {
	t.Parallel()
	in := `{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}

{"timestamp": 3, "input_length": 5, "output_length": 1, "hash_ids": [1]}
{"timestamp": 4, "input_length": 5, "output_length": 1, "hash_ids": [1]
`
	_, err := Read(strings.NewReader(in), "t.jsonl", 512, 0)
	if err == nil || !strings.HasPrefix(err.Error(), "t.jsonl:4: ") {
		t.Fatalf("err = %v, want it to start with t.jsonl:4:", err)
	}
}

func TestReadSortsAndLimits(t *testing.T) {
	t.Parallel()
	in := `{"timestamp": 5, "input_length": 5, "output_length": 1, "hash_ids": [1]}
{"timestamp": 2, "input_length": 5, "output_length": 2, "hash_ids": [1]}
{"timestamp": 2, "input_length": 5, "output_length": 3, "hash_ids": [1]}
this line is never read because of the limit`
	recs, err := Read(strings.NewReader(in), "t", 512, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("got %d records, want 3", len(recs))
	}
	gotLines := []int{recs[0].Line, recs[1].Line, recs[2].Line}
	if gotLines[0] != 2 || gotLines[1] != 3 || gotLines[2] != 1 {
		t.Fatalf("lines after sort %v, want [2 3 1]", gotLines)
	}
}

func TestReadEmpty(t *testing.T) {
	t.Parallel()
	if _, err := Read(strings.NewReader("\n\n"), "empty", 512, 0); err == nil {
		t.Fatal("want error for empty trace")
	}
}

func TestReadFileMissing(t *testing.T) {
	t.Parallel()
	_, err := ReadFile(filepath.Join(t.TempDir(), "nope.jsonl"), 512, 0)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want ErrNotExist", err)
	}
}

func TestSharedTraces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		n    int
	}{
		{"conversation_trace.jsonl", 12031},
		{"synthetic_trace.jsonl", 3993},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			path := sharedtest.Path(t, "traces/"+tt.file)
			recs, err := ReadFile(path, 512, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != tt.n {
				t.Fatalf("%d records, want %d", len(recs), tt.n)
			}
		})
	}
}

func FuzzParseLine(f *testing.F) {
	seeds := []string{
		`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}`,
		`{"timestamp": 1.5, "input_length": 1, "output_length": 1, "hash_ids": [9]}`,
		`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []}`,
		`{}`, `[]`, `null`, ``,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := ParseLine(line, 512)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		if rec.InputLength < 1 || rec.OutputLength < 1 || len(rec.HashIDs) == 0 ||
			rec.InputLength > len(rec.HashIDs)*512 || rec.TimestampMs < 0 {
			t.Fatalf("accepted invalid record %+v", rec)
		}
		s := Synth{Vocab: 100, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 8}
		toks := s.Tokens(nil, rec, 0)
		if len(toks) != s.InputLen(rec) {
			t.Fatalf("Tokens gave %d ids, InputLen %d", len(toks), s.InputLen(rec))
		}
	})
}
