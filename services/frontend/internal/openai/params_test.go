package openai

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Every refusal of the sampling, choice and format fields names its
// parameter and says what is wrong, for chat and completions alike.
func TestParamErrors(t *testing.T) {
	t.Parallel()
	big := make([]string, MaxLogitBias+1)
	for i := range big {
		big[i] = fmt.Sprintf(`"%d":1`, i)
	}
	completionOnly := map[string]bool{"best_of": true, "echo with logprobs": true}
	hugeSchema := `{"type":"object","description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`
	tests := []struct {
		name, fields, param, message string
	}{
		{"presence_penalty high", `"presence_penalty":2.5`, "presence_penalty", "presence_penalty must be in [-2, 2], got 2.5."},
		{"presence_penalty low", `"presence_penalty":-3`, "presence_penalty", "presence_penalty must be in [-2, 2], got -3."},
		{"frequency_penalty", `"frequency_penalty":2.01`, "frequency_penalty", "frequency_penalty must be in [-2, 2], got 2.01."},
		{"penalty type", `"frequency_penalty":"1"`, "frequency_penalty", "Invalid type"},
		{"logit_bias too many", `"logit_bias":{` + strings.Join(big, ",") + `}`, "logit_bias", "logit_bias has 1025 entries; at most 1024 are allowed."},
		{"logit_bias word key", `"logit_bias":{"abc":1}`, "logit_bias", `logit_bias keys must be token ids in decimal, such as "1234"; got "abc".`},
		{"logit_bias negative key", `"logit_bias":{"-1":1}`, "logit_bias", `got "-1"`},
		{"logit_bias leading zero", `"logit_bias":{"07":1}`, "logit_bias", `got "07"`},
		{"logit_bias plus", `"logit_bias":{"+7":1}`, "logit_bias", `got "+7"`},
		{"logit_bias over uint32", `"logit_bias":{"4294967296":1}`, "logit_bias", `got "4294967296"`},
		{"logit_bias lowest bad key named", `"logit_bias":{"zz":1,"aa":1}`, "logit_bias", `got "aa"`},
		{"logit_bias high", `"logit_bias":{"5":101}`, "logit_bias", `logit_bias["5"] must be in [-100, 100], got 101.`},
		{"logit_bias low", `"logit_bias":{"5":-100.5}`, "logit_bias", `logit_bias["5"] must be in [-100, 100], got -100.5.`},
		{"logit_bias not an object", `"logit_bias":[1]`, "logit_bias", "Invalid type"},
		{"logit_bias value not a number", `"logit_bias":{"5":"x"}`, "logit_bias", `Invalid type for "logit_bias": expected float64, got JSON string.`},
		{"n zero", `"n":0`, "n", "n must be in [1, 8], got 0."},
		{"n over the cap", `"n":9`, "n", "n must be in [1, 8], got 9."},
		{"response_format not an object", `"response_format":"json"`, "response_format", "Invalid type"},
		{"response_format no type", `"response_format":{}`, "response_format.type", `response_format.type is required: "text", "json_object" or "json_schema".`},
		{"response_format bad type", `"response_format":{"type":"xml"}`, "response_format.type", `response_format.type must be "text", "json_object" or "json_schema", got "xml".`},
		{"json_schema with type json_object", `"response_format":{"type":"json_object","json_schema":{"name":"x"}}`, "response_format.json_schema", `only allowed with type "json_schema", got type "json_object"`},
		{"json_schema missing", `"response_format":{"type":"json_schema"}`, "response_format.json_schema", "needs json_schema, with a name and a schema"},
		{"json_schema no name", `"response_format":{"type":"json_schema","json_schema":{"schema":{}}}`, "response_format.json_schema.name", `must be 1 to 64 letters, digits, underscores or dashes, got "".`},
		{"json_schema bad name", `"response_format":{"type":"json_schema","json_schema":{"name":"my schema"}}`, "response_format.json_schema.name", `got "my schema"`},
		{"json_schema long name", `"response_format":{"type":"json_schema","json_schema":{"name":"` + strings.Repeat("n", 65) + `"}}`, "response_format.json_schema.name", "1 to 64"},
		{"schema not an object", `"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":true}}`, "response_format.json_schema.schema", "response_format.json_schema.schema must be a JSON Schema object."},
		{"schema pattern", `"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]{5}$"}}}}}`,
			"response_format.json_schema.schema", `The schema is refused at #/properties/zip (keyword "pattern")`},
		{"schema patternProperties", `"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","patternProperties":{"^x":{}}}}}`,
			"response_format.json_schema.schema", `(keyword "patternProperties")`},
		{"schema too large", `"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":` + hugeSchema + `}}`,
			"response_format.json_schema.schema", fmt.Sprintf("The schema is %d bytes; at most %d are allowed.", len(hugeSchema), MaxSchemaBytes)},
		{"schema unknown field", `"response_format":{"type":"json_schema","json_schema":{"name":"s","schemer":{}}}`, "schemer", "Unrecognized request argument supplied: schemer"},
		{"best_of", `"best_of":3,"n":2`, "best_of", "best_of must be absent or equal to n (2), got 3"},
		{"echo with logprobs", `"echo":true,"logprobs":1`, "echo", "echo with logprobs is not supported"},
	}
	for _, tc := range tests {
		for _, chat := range []bool{true, false} {
			if chat && completionOnly[tc.name] {
				continue
			}
			t.Run(fmt.Sprintf("%s/chat=%v", tc.name, chat), func(t *testing.T) {
				t.Parallel()
				var err error
				if chat {
					_, _, err = DecodeChat([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}],` + tc.fields + `}`))
				} else {
					_, _, err = DecodeCompletion([]byte(`{"model":"m","prompt":"x",` + tc.fields + `}`))
				}
				want400(t, err, tc.param, tc.message)
			})
		}
	}
}

// The fields in range arrive in the Generation as the engine takes them.
func TestParamsAccepted(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`
	tests := []struct {
		name, fields string
		check        func(t *testing.T, g Generation)
	}{
		{"defaults", ``, func(t *testing.T, g Generation) {
			if g.N != 1 || g.PresencePenalty != 0 || g.FrequencyPenalty != 0 || g.LogitBias != nil || !g.Format.IsZero() || g.Echo {
				t.Errorf("%+v", g)
			}
		}},
		{"penalties at the bounds", `"presence_penalty":-2,"frequency_penalty":2`, func(t *testing.T, g Generation) {
			if g.PresencePenalty != -2 || g.FrequencyPenalty != 2 {
				t.Errorf("penalties %v %v", g.PresencePenalty, g.FrequencyPenalty)
			}
		}},
		{"zero penalties", `"presence_penalty":0,"frequency_penalty":null`, func(t *testing.T, g Generation) {
			if g.PresencePenalty != 0 || g.FrequencyPenalty != 0 {
				t.Errorf("penalties %v %v", g.PresencePenalty, g.FrequencyPenalty)
			}
		}},
		{"logit_bias", `"logit_bias":{"0":-100,"72":100,"4294967295":0.5}`, func(t *testing.T, g Generation) {
			if len(g.LogitBias) != 3 || g.LogitBias[0] != -100 || g.LogitBias[72] != 100 || g.LogitBias[4294967295] != 0.5 {
				t.Errorf("bias %v", g.LogitBias)
			}
		}},
		{"logit_bias empty", `"logit_bias":{}`, func(t *testing.T, g Generation) {
			if g.LogitBias != nil {
				t.Errorf("bias %v", g.LogitBias)
			}
		}},
		{"n", `"n":8,"seed":7`, func(t *testing.T, g Generation) {
			if g.N != 8 || *SeedFor(g.Seed, 0) != 7 || *SeedFor(g.Seed, 3) != 10 || SeedFor(nil, 3) != nil {
				t.Errorf("n %d", g.N)
			}
		}},
		{"text", `"response_format":{"type":"text"}`, func(t *testing.T, g Generation) {
			if !g.Format.IsZero() {
				t.Errorf("format %+v", g.Format)
			}
		}},
		{"json_object", `"response_format":{"type":"json_object"}`, func(t *testing.T, g Generation) {
			if !g.Format.JSONObject || len(g.Format.JSONSchema) != 0 || g.Format.Param != "response_format" {
				t.Errorf("format %+v", g.Format)
			}
		}},
		{"json_schema", `"response_format":{"type":"json_schema","json_schema":{"name":"person","description":"d","strict":true,"schema":` + schema + `}}`, func(t *testing.T, g Generation) {
			if g.Format.JSONObject || string(g.Format.JSONSchema) != schema || g.Format.Param != "response_format" {
				t.Errorf("format %+v", g.Format)
			}
		}},
		{"json_schema without schema", `"response_format":{"type":"json_schema","json_schema":{"name":"any"}}`, func(t *testing.T, g Generation) {
			if string(g.Format.JSONSchema) != "{}" {
				t.Errorf("format %+v", g.Format)
			}
		}},
		{"null response_format", `"response_format":null`, func(t *testing.T, g Generation) {
			if !g.Format.IsZero() {
				t.Errorf("format %+v", g.Format)
			}
		}},
	}
	for _, tc := range tests {
		for _, chat := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/chat=%v", tc.name, chat), func(t *testing.T) {
				t.Parallel()
				sep := ""
				if tc.fields != "" {
					sep = ","
				}
				var g Generation
				var err error
				if chat {
					_, g, err = DecodeChat([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]` + sep + tc.fields + `}`))
				} else {
					_, g, err = DecodeCompletion([]byte(`{"model":"m","prompt":"x"` + sep + tc.fields + `}`))
				}
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, g)
			})
		}
	}
}

func TestCompletionEchoAndBestOf(t *testing.T) {
	t.Parallel()
	for _, fields := range []string{`"echo":true`, `"echo":true,"n":3,"best_of":3`, `"best_of":1`, `"echo":false,"logprobs":2`} {
		_, g, err := DecodeCompletion([]byte(`{"model":"m","prompt":"x",` + fields + `}`))
		if err != nil {
			t.Fatalf("%s: %v", fields, err)
		}
		if g.Echo != strings.Contains(fields, `"echo":true`) {
			t.Fatalf("%s: echo %v", fields, g.Echo)
		}
	}
}

// want400 checks that err is a 400 naming param whose message contains
// message.
func want400(t *testing.T, err error, param, message string) {
	t.Helper()
	var apiErr *Error
	switch {
	case !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest:
		t.Fatalf("want a 400, got %v", err)
	case apiErr.Param != param:
		t.Errorf("param %q, want %q (%s)", apiErr.Param, param, apiErr.Message)
	case !strings.Contains(apiErr.Message, message):
		t.Errorf("message %q, want it to contain %q", apiErr.Message, message)
	}
}
