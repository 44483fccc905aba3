package openai

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestLogprobMapJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		m    LogprobMap
		want string
	}{
		{name: "nil is an empty object", want: `[{}]`},
		{name: "most likely first", m: LogprobMap{{"b", -0.25}, {"a", -1.5}, {"\"", -9999}}, want: `[{"b":-0.25,"a":-1.5,"\"":-9999}]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal([]LogprobMap{tc.m})
			if err != nil || string(b) != tc.want {
				t.Fatalf("got %s %v, want %s", b, err, tc.want)
			}
			var back []LogprobMap
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if len(back[0]) != len(tc.m) || len(tc.m) > 0 && !reflect.DeepEqual(back[0], tc.m) {
				t.Fatalf("round trip %v, want %v", back[0], tc.m)
			}
		})
	}
	var null []LogprobMap
	if err := json.Unmarshal([]byte(`[null]`), &null); err != nil || null[0] != nil {
		t.Fatalf("null: %v %v", null, err)
	}
	if err := json.Unmarshal([]byte(`[[1]]`), &null); err == nil {
		t.Fatal("an array decoded as a top_logprobs object")
	}
}
