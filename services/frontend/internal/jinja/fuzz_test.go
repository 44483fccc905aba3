package jinja

import (
	"strings"
	"testing"
)

// fuzzSeeds are templates that reach most of the engine.
var fuzzSeeds = []string{
	"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] | trim + '<|im_end|>\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
	"{%- set ns = namespace(found=false) -%}{%- for m in messages[::-1] if m.role != 'tool' -%}{%- if loop.first -%}{% set ns.found = true %}{%- endif -%}{%- endfor -%}{{ ns.found }}",
	"{% macro f(x, d=1) %}{{ x ~ d }}{% if d < 3 %}{{ f(x, d + 1) }}{% endif %}{% endmacro %}{{ f('a') }}",
	"{{ tools | tojson(indent=2) }}{{ (messages | map(attribute='content') | join(',')).split(',') | length }}",
	"{% set x %}  {{ 'a' * 3 }}  {% endset %}{{ x.strip().upper() }}{% raw %}{{ }}{% endraw %}{# c #}",
	"{{ {'a': [1, 2.5, none, true], 1: 'x'} | dictsort | list }}{{ '%s-%d' | format('a', 2) }}{{ '{}'.format(1) }}",
	"{% for k, v in {'a': 1}.items() %}{% if k is string and v is number %}{{ k }}{% break %}{% endif %}{% else %}none{% endfor %}",
	"{{ raise_exception('no') if messages | length > 9 else strftime_now('%Y') }}{{ range(3) | sum }}{{ [3, 1] | sort | first }}",
}

// FuzzTemplate: parsing any source returns a template or an error, never
// panics; rendering it finishes (within its limits) without panicking.
func FuzzTemplate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	msgs := func() *List {
		return NewList(NewDict().Set("role", "system").Set("content", "S"), NewDict().Set("role", "user").Set("content", " hi "),
			NewDict().Set("role", "assistant").Set("content", "").Set("tool_calls", NewList(NewDict().Set("function", NewDict().Set("name", "f").Set("arguments", NewDict().Set("a", 1))))))
	}
	f.Fuzz(func(t *testing.T, src string) {
		tm, err := Parse("fuzz", src)
		if err != nil {
			return
		}
		vars := map[string]any{"messages": msgs(), "tools": NewList(NewDict().Set("type", "function")), "add_generation_prompt": true, "bos_token": "<s>"}
		_, _ = tm.Render(vars, Options{Limits: Limits{Steps: 100_000, Bytes: 4 << 20, Calls: 32}})
	})
}

// FuzzParseJSON: any bytes decode or fail, and what decodes encodes.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, "x", null, true, {"b": {}}]}`, `"\u00e9\n"`, `-1e400`, `[[[]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data)
		if err != nil {
			return
		}
		var b strings.Builder
		if err := toJSON(&b, v, &jsonOpts{itemSep: ", ", keySep: ": "}, 0); err != nil {
			t.Fatalf("decoded %q but cannot encode it: %v", data, err)
		}
	})
}
