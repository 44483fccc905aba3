package jinja

import (
	"testing"
	"time"
)

func render(t *testing.T, src string, vars map[string]any) (string, error) {
	t.Helper()
	tm, err := Parse("t", src)
	if err != nil {
		return "", err
	}
	return tm.Render(vars, Options{Now: func() time.Time { return time.Date(2024, 7, 26, 9, 5, 0, 0, time.UTC) }})
}

// TestRender pins Python Jinja's output (as Hugging Face configures it:
// trim_blocks, lstrip_blocks, loop controls) for the features chat
// templates use.
func TestRender(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, src, want string }{
		// Whitespace control.
		{"trim_blocks", "{% if true %}\nx\n{% endif %}\ny", "x\ny"},
		{"lstrip_blocks", "  {% if true %}\n  x\n  {% endif %}\ny", "  x\ny"},
		{"lstrip not for expressions", "a\n  {{ 'b' }}", "a\n  b"},
		{"dash strips one side", "a  {%- if true -%}  b  {%- endif %}", "ab"},
		{"dash strips only adjacent text", "a {{ 'x' }}{%- if true %}b{% endif %}", "a xb"},
		{"dash after expression", "{{- 'x' -}}{{ 'y' }} z", "xy z"},
		{"plus keeps", "  {%+ if true %}x{% endif +%}\ny", "  x\ny"},
		{"comments", "a{# note #}b\n  {# line #}\nc", "ab\nc"},
		{"raw", "{% raw %}{{ x }}{% endraw %}", "{{ x }}"},
		{"closer inside string", "{{ '}}' ~ \"%}\" }}", "}}%}"},
		{"dict literal closing braces", "{{ {'a': {'b': 1}}['a']['b'] }}", "1"},
		// Printing values as Python's str().
		{"values", "{{ none }}|{{ true }}|{{ 1.0 }}|{{ 1e20 }}|{{ 0.1 + 0.2 }}|{{ [1, 'a', none] }}|{{ {'k': 'v'} }}|{{ undefined_name }}",
			"None|True|1.0|1e+20|0.30000000000000004|[1, 'a', None]|{'k': 'v'}|"},
		{"repr quotes", `{{ ["it's", 'a"b', 'x\ny'] }}`, `["it's", 'a"b', 'x\ny']`},
		// Operators.
		{"arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 'ab' * 2 }} {{ [1] + [2] }}", "3 -4 2 3.5 1024 abab [1, 2]"},
		{"concat", "{{ 'a' ~ 1 ~ none }}", "a1None"},
		{"comparison chain", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ 1 == 1.0 }}", "True False True True True"},
		{"and or return operands", "{{ '' or 'x' }} {{ 'a' and 'b' }} {{ not '' }}", "x b True"},
		{"conditional", "{{ 'y' if n > 2 else 'n' }}{{ 'z' if false }}", "y"},
		{"precedence", "{{ 1 + 2 * 3 }} {{ -2 ** 2 }} {{ 'a' ~ 'b' | upper }}", "7 4 aB"},
		// Statements.
		{"for loop object", "{% for m in messages %}{{ loop.index }}/{{ loop.length }}{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}", "1/2user,2/2assistant"},
		{"for else", "{% for x in [] %}x{% else %}empty{% endfor %}", "empty"},
		{"for filter", "{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}", "2242"},
		{"for unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "b=1;a=[1, 2.5, 'x', None, True];"},
		{"for over dict", "{% for k in d %}{{ k }}{% endfor %}", "ba"},
		{"break continue", "{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}", "023"},
		{"loop scope", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "1"},
		{"namespace", "{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}", "4"},
		{"if scope", "{% if true %}{% set x = 5 %}{% endif %}{{ x }}", "5"},
		{"set unpack", "{% set a, b = [1, 2] %}{{ b }}{{ a }}", "21"},
		{"set block", "{% set x | trim %}  hi  {% endset %}[{{ x }}]", "[hi]"},
		{"filter block", "{% filter upper %}ab{% endfilter %}", "AB"},
		{"macro", "{% macro f(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ f(1) }}{{ f(1, b=2) }}{{ f() }}", "<1B><12><B>"},
		{"macro sees globals", "{% macro f() %}{{ n }}{% endmacro %}{{ f() }}", "3"},
		{"generation", "{% generation %}hi{% endgeneration %}", "hi"},
		{"do", "{% set l = [] %}{% do l.append(1) %}{{ l }}", "[1]"},
		// Attribute and item access.
		{"attr or item", "{{ messages[0].role }} {{ messages[-1]['content'] }} {{ messages[5] is defined }}", "user yo False"},
		{"missing attr is undefined", "{{ messages[0].nope is defined }}{{ none.x is defined }}", "FalseFalse"},
		{"slices", "{{ 'hello'[1:3] }} {{ 'abc'[::-1] }} {{ [1, 2, 3][-2:] }} {{ messages[1:] | length }}", "el cba [2, 3] 1"},
		// Filters.
		{"tojson", `{{ d | tojson }}`, `{"b": 1, "a": [1, 2.5, "x", null, true]}`},
		{"tojson indent keeps order", "{{ {'z': [], 'a': {'b': 'é'}} | tojson(indent=2) }}", "{\n  \"z\": [],\n  \"a\": {\n    \"b\": \"é\"\n  }\n}"},
		{"tojson escapes", `{{ "a\"b\\c\n<&>\u2028" | tojson }}`, "\"a\\\"b\\\\c\\n<&>\u2028\""},
		{"tojson options", `{{ {'b': 'é', 'a': 1} | tojson(ensure_ascii=true, sort_keys=true, separators=[',', ':']) }}`, `{"a":1,"b":"\u00e9"}`},
		{"from_json", `{{ ('{"b": 1, "a": [1.0]}' | from_json).a[0] }}`, "1.0"},
		{"trim default length", "[{{ messages[0].content | trim }}]{{ x | default('d') }}{{ '' | default('e', true) }}{{ messages | length }}", "[hi]de2"},
		{"join map select", "{{ messages | map(attribute='role') | join(', ') }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ [1, 0, 2] | select | list }}|{{ messages | rejectattr('role', 'eq', 'user') | map(attribute='content') | first }}",
			"user, assistant|1|[1, 2]|yo"},
		{"sort unique dictsort", "{{ [3, 1, 2] | sort }}{{ ['b', 'A', 'a'] | unique | list }}{{ d | dictsort | first }}{{ [{'n': 2}, {'n': 1}] | sort(attribute='n') | map(attribute='n') | list }}",
			"[1, 2, 3]['b', 'A']['a', [1, 2.5, 'x', None, True]][1, 2]"},
		{"string filters", "{{ 'hello world' | title }} {{ 'ABC' | lower }} {{ 'x' | upper }} {{ 'ab' | capitalize }} {{ 'a-b' | replace('-', '+') }} {{ '<a>' | e }}",
			"Hello World abc X Ab a+b &lt;a&gt;"},
		{"indent", "{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(first=true) }}", "a\n  b\n\n  c|    a\n    b"},
		{"numbers", "{{ '42' | int + 1 }} {{ 'x' | int }} {{ 2 | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ [1, 2] | sum }} {{ [3, 9, 1] | max }}", "43 0 2.0 3 2.57 3 9"},
		{"format", "{{ '%s is %d' | format('x', 3) }} {{ '%05.1f' % 3.14159 }}", "x is 3 003.1"},
		{"items count", "{% for k, v in {'a': 1} | items %}{{ k }}{{ v }}{% endfor %}{{ 'ab' | count }}", "a12"},
		// Tests.
		{"tests", "{{ x is defined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ d is mapping }}{{ msgs is iterable }}{{ 3 is divisibleby 3 }}{{ 'a' is in 'ab' }}{{ 1 is not string }}",
			"FalseTrueTrueTrueTrueTrueTrueTrueTrue"},
		{"sameas", "{{ true is sameas true }}{{ 1 is sameas true }}", "TrueFalse"},
		// Python methods.
		{"str methods", "{{ ' a '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a b  c'.split() }}|{{ 'a,b'.split(',') }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'ab'.startswith(('x', 'a')) }}|{{ 'ab'.endswith('b') }}|{{ 'hello'.replace('l', 'L', 1) }}|{{ \"they're\".title() }}|{{ 'abc'.find('c') }}|{{ '-'.join(['a', 'b']) }}",
			"a|a|['a', 'b', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c']|True|True|heLlo|They'Re|2|a-b"},
		{"str format", "{{ '{}-{}'.format(1, 'a') }} {{ '{0}{0}'.format('x') }} {{ '{n:>4}'.format(n=7) }} {{ '{{}}'.format() }}", "1-a xx    7 {}"},
		{"dict methods", "{{ d.get('b') }}{{ d.get('z', 'none') }}{{ d.keys() | list }}{{ d.values() | length }}", "1none['b', 'a']2"},
		{"list methods", "{% set l = [1, 2, 3] %}{{ l.pop() }}{{ l.pop(0) }}{{ l }}{% do l.insert(0, 9) %}{{ l.index(2) }}{{ l }}", "31[2]1[9, 2]"},
		{"number keys", "{% set m = {1024: 'a', 4096: 'b'} %}{% for k, v in m | dictsort %}{{ k > 2000 }}{{ v }}{% endfor %}{{ m[1024] }}{{ m | tojson }}", "FalseaTrueba{\"1024\": \"a\", \"4096\": \"b\"}"},
		// Globals.
		{"range", "{{ range(3) | list }}{{ range(1, 7, 2) | list }}{{ range(3, 0, -1) | list }}", "[0, 1, 2][1, 3, 5][3, 2, 1]"},
		{"dict joiner", "{{ dict(a=1, b=2) }}{% set j = joiner('|') %}{% for x in [1, 2] %}{{ j() }}{{ x }}{% endfor %}", "{'a': 1, 'b': 2}1|2"},
		{"strftime_now", "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%-d %B, %H:%M') }}", "26 Jul 2024 26 July, 09:05"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := render(t, tc.src, testVars())
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// testVars are fresh globals for one render.
func testVars() map[string]any {
	msgs := NewList(NewDict().Set("role", "user").Set("content", " hi "), NewDict().Set("role", "assistant").Set("content", "yo"))
	return map[string]any{"messages": msgs, "msgs": msgs, "n": 3, "d": NewDict().Set("b", 1).Set("a", NewList(int64(1), 2.5, "x", nil, true))}
}
