package openai

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// decodePromptSlow is what Prompt.UnmarshalJSON did before its token-id
// scan: encoding/json alone. The scan must agree with it on every input.
func decodePromptSlow(data []byte) (Prompt, error) {
	var p Prompt
	var raw []json.RawMessage
	trimmed := strings.TrimSpace(string(data))
	switch {
	case trimmed == "null":
		return p, nil
	case strings.HasPrefix(trimmed, `"`):
		var s string
		err := json.Unmarshal(data, &s)
		p.Texts = []string{s}
		return p, err
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return p, err
	}
	if len(raw) == 0 {
		p.Texts = []string{}
		return p, nil
	}
	first := strings.TrimSpace(string(raw[0]))
	switch {
	case strings.HasPrefix(first, `"`):
		err := json.Unmarshal(data, &p.Texts)
		return p, err
	case strings.HasPrefix(first, `[`):
		err := json.Unmarshal(data, &p.Tokens)
		return p, err
	}
	var ids []int64
	err := json.Unmarshal(data, &ids)
	p.Tokens = [][]int64{ids}
	return p, err
}

func TestPromptTokenIDs(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`[1,2,3]`, ` [ 1 , 2 ,3 ] `, "[\n1,\t2\r]", `[]`, `[0]`, `[-0]`, `[-5]`,
		`[[1,2]]`, `[ [ 7 ] ]`, `[[]]`, `[[1],[2]]`, `[[1,2],3]`,
		`[9223372036854775807]`, `[-9223372036854775808]`,
		`[9223372036854775808]`, `[-9223372036854775809]`, `[18446744073709551616]`, `[99999999999999999999999]`,
		`[1.0]`, `[1e3]`, `[1E3]`, `[1.5]`, `[1,"a"]`, `[1,null]`, `[true]`, `[1,[2]]`,
		`["a","b"]`, `"text"`, `null`, `5`, `{}`,
	} {
		var got Prompt
		gotErr := json.Unmarshal([]byte(in), &got)
		want, wantErr := decodePromptSlow([]byte(in))
		if (gotErr != nil) != (wantErr != nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Errorf("%s: err %v, encoding/json %v", in, gotErr, wantErr)
			continue
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, encoding/json %+v", in, got, want)
		}
	}
}

// A large prompt decodes to the same ids by the scan as by encoding/json.
func TestPromptTokenIDsLarge(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int64, 100_000)
	var b strings.Builder
	b.WriteString("[")
	for i := range ids {
		ids[i] = r.Int64N(32000)
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(strconv.FormatInt(ids[i], 10))
	}
	b.WriteString("]")
	var p Prompt
	if err := json.Unmarshal([]byte(b.String()), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Tokens) != 1 || !reflect.DeepEqual(p.Tokens[0], ids) {
		t.Fatal("ids differ")
	}
}

// FuzzPromptTokenIDs: the scan and encoding/json agree on every input.
func FuzzPromptTokenIDs(f *testing.F) {
	for _, s := range []string{`[1,2,3]`, `[[1,2]]`, `[-0]`, `[1.0]`, `[9223372036854775808]`, `["a"]`, `[ 1 , 2 ]`, `[[1],[2]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got Prompt
		gotErr := json.Unmarshal(data, &got)
		want, wantErr := decodePromptSlow(data)
		if (gotErr != nil) != (wantErr != nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
			t.Fatalf("%q: err %v, encoding/json %v", data, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v, encoding/json %+v", data, got, want)
		}
	})
}

func BenchmarkDecodeCompletionTokenIDs(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var sb strings.Builder
	sb.WriteString(`{"model":"m","max_tokens":2,"stream":true,"prompt":[`)
	for i := range 100_000 {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(strconv.Itoa(r.IntN(32000)))
	}
	sb.WriteString("]}")
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeCompletion(body); err != nil {
			b.Fatal(err)
		}
	}
}

// decodeCompletionBody equals encoding/json on the whole body: the same
// request, or the same error.
func FuzzSplitTokenPrompt(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","prompt":[1,2,3]}`, `{"prompt":[[5,6]],"model":"m","max_tokens":2}`,
		`{"model":"m","prompt":[1,2],"prompt":[3]}`, `{"Prompt":[1],"model":"m"}`, `{"pr\u006fmpt":[1]}`,
		`{"model":"m","stop":["]","}"],"prompt":[7]}`, `{"model":"m","x":{"prompt":[1]},"prompt":[2]}`,
		`{"model":"m","prompt":[]}`, `{"model":"m","prompt":[1.5]}`, `{"model":"m","prompt":"text"}`,
		`{"model":"m","prompt":[1],"max_tokens":"x"}`, `{"model":"m","prompt":[1]`, `{"model":"m" "prompt":[1]}`,
		` {"prompt" : [ 1 , 2 ] , "model" : "m" } `, `{"model":"m","prompt":[1]} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast, slow CompletionRequest
		fastErr := decodeCompletionBody(data, &fast)
		slowErr := unmarshal(data, &slow)
		if (fastErr == nil) != (slowErr == nil) || fastErr != nil && fastErr.Error() != slowErr.Error() {
			t.Fatalf("%q: err %v, encoding/json %v", data, fastErr, slowErr)
		}
		if fastErr == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: %+v, encoding/json %+v", data, fast, slow)
		}
	})
}

// The split applies to the usual token-id bodies and steps aside where
// encoding/json's own rules decide.
func TestSplitTokenPrompt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		ids  []int64 // nil: the split steps aside
		rest string
	}{
		{`{"model":"m","prompt":[1,2,3]}`, []int64{1, 2, 3}, `{"model":"m","prompt":null}`},
		{` { "prompt" : [[4, 5]] , "stream":true} `, []int64{4, 5}, ` { "prompt" : null , "stream":true} `},
		{`{"x":{"prompt":[9]},"stop":["],\"prompt\":[8]"],"prompt":[7]}`, []int64{7}, `{"x":{"prompt":[9]},"stop":["],\"prompt\":[8]"],"prompt":null}`},
		{`{"prompt":[1],"prompt":[2]}`, nil, ""},
		{`{"PROMPT":[1]}`, nil, ""},
		{`{"model":"m","Prompt":[1],"prompt":[2]}`, nil, ""},
		{`{"pr\u006fmpt":[1]}`, nil, ""},
		{`{"prompt":"text"}`, nil, ""},
		{`{"prompt":[]}`, nil, ""},
		{`{"prompt":[[1],[2]]}`, nil, ""},
		{`{"prompt":[1.0]}`, nil, ""},
		{`{"model":"m"}`, nil, ""},
		{`{"prompt":[1]} {}`, nil, ""},
	} {
		rest, ids, ok := splitTokenPrompt([]byte(tc.body))
		if ok != (tc.ids != nil) || ok && (!reflect.DeepEqual(ids, tc.ids) || string(rest) != tc.rest) {
			t.Errorf("%s: ok %v ids %v rest %s; want %v %s", tc.body, ok, ids, rest, tc.ids, tc.rest)
		}
	}
}

// tokenIDs sizes its slice by the array's own commas, not by commas later
// in the body (a long string of them must not make it allocate more).
func TestTokenIDsCapacity(t *testing.T) {
	t.Parallel()
	ids, _, ok := tokenIDs([]byte(`[1, 2, 3], "x":"` + strings.Repeat(",", 1<<16) + `"`))
	if !ok || len(ids) != 3 || cap(ids) != 3 {
		t.Fatalf("ids %v ok %v cap %d; want 3 ids, capacity 3", ids, ok, cap(ids))
	}
}

// A token-id completion decodes without a per-id allocation: the split
// took it (encoding/json made one RawMessage per id, ~10,000 here).
func TestDecodeCompletionTokenIDsAllocs(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"model":"m","max_tokens":2,"prompt":[`)
	for i := range 10_000 {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(strconv.Itoa(i % 32000))
	}
	sb.WriteString("]}")
	body := []byte(sb.String())
	if n := testing.AllocsPerRun(5, func() {
		if _, _, err := DecodeCompletion(body); err != nil {
			t.Fatal(err)
		}
	}); n > 100 {
		t.Fatalf("%.0f allocations for 10,000 ids; the token-id split was not taken", n)
	}
}

// skipValue stops at the first delimiter after a scalar and at the
// matching bracket, so a long run of whitespace costs one pass (it once
// rescanned the run from every byte: a 4 MiB body was an hour of CPU).
func TestSkipValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int // -1: !ok
	}{
		{`1` + strings.Repeat(" ", 1<<20) + `2}`, 1},
		{`true,`, 4},
		{`"a\"b",`, 6},
		{`{"x":[1,{"y":"]"}]} ,`, 19},
		{`[[],[]]`, 7},
		{`"open`, -1},
		{`[1,2`, -1},
		{`123`, -1},
	} {
		got, ok := skipValue([]byte(tc.in), 0)
		if !ok {
			got = -1
		}
		if got != tc.want {
			t.Errorf("skipValue(%.20q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	// The body the old scan took quadratically still decodes to
	// encoding/json's own error.
	body := []byte(`{"a":1` + strings.Repeat(" ", 1<<20) + `2}`)
	var fast, slow CompletionRequest
	if fastErr, slowErr := decodeCompletionBody(body, &fast), unmarshal(body, &slow); fastErr == nil || fastErr.Error() != slowErr.Error() {
		t.Fatalf("err %v, encoding/json %v", fastErr, slowErr)
	}
}
