package jinja

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{"{{ x", "expected \"}}\""},
		{"{% if x %}", "expected 'elif' or 'else' or 'endif'"},
		{"{% endfor %}", "unknown or unexpected tag 'endfor'"},
		{"{% break %}", "'break' outside a loop"},
		{"{% for x in y %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}", "'break' outside a loop"},
		{"{{ 'abc }}", "unterminated string"},
		{"{{ 1 + }}", "expected an expression"},
		{"{{ a b }}", "expected end of tag"},
		{"{% include 'x' %}", "unknown or unexpected tag 'include'"},
		{"{% for x in y recursive %}{% endfor %}", "recursive loops are not supported"},
		{"{# open", "unterminated comment"},
		{"{{ $ }}", "unexpected character"},
		{"line\n\n{{ ) }}", "line 3"},
		{"{{ " + strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300) + " }}", "nested more than"},
		{"{{ " + strings.Repeat("1 + ", 300) + "1 }}", "nested more than"},
		{strings.Repeat("{% if 1 %}", 150) + strings.Repeat("{% endif %}", 150), "nested more than"},
	}
	for _, tc := range tests {
		_, err := Parse("tmpl.jinja", tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "tmpl.jinja") {
			t.Errorf("Parse(%.40q) = %v, want an error naming the template and saying %q", tc.src, err, tc.want)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src, want string
		limit     bool
	}{
		{"{{ x.y }}", "'x' is undefined", false},
		{"{{ 'a' + 1 }}", "unsupported operand type(s) for +: 'str' and 'int'", false},
		{"{{ 1 / 0 }}", "division by zero", false},
		{"{{ none | length }}", "has no len()", false},
		{"{{ x() }}", "'x' is undefined", false},
		{"{% set x = 1 %}{% set x.y = 2 %}", "non-namespace", false},
		{"{{ [1] | nofilter }}", "no filter named 'nofilter'", false},
		{"{{ 1 is nothing }}", "no test named 'nothing'", false},
		{"\n{{ 'x'.split('') }}", "line 2", false},
		{"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "macro calls nested", true},
		{"{{ range(100000000000) }}", "range of", true},
		{"{{ 'x' * 100000000000 }}", "a string of", true},
		{"{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}{% endfor %}", "render limits", true},
		{"{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "bytes", true},
		{"{{ 2 ** 100000000000 }}", "steps", true},
		{"{{ 'x'.rjust(9223372036854775807) }}", "width", true},
		{"{{ ['x' * 10000000] * 100 }}", "bytes", true},
		{"{{ (['x' * 10000000] * 100) | tojson }}", "bytes", true},
		{"{{ ('x ' * 10000000).split() | length }}", "steps", true},
		{"{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", "steps", true},
	}
	for _, tc := range tests {
		_, err := render(t, tc.src, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrLimit) != tc.limit {
			t.Errorf("render(%.50q) = %v, want %q (limit %v)", tc.src, err, tc.want, tc.limit)
		}
	}
}

// Extreme slice steps and range bounds do not overflow.
func TestExtremeIntegers(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"{{ 'abcd'[2::9223372036854775806] }}":                                               "c",
		"{{ 'abcd'[::-9223372036854775807] }}":                                               "d",
		"{{ range(-9223372036854775807, 9223372036854775807, 9223372036854775807) | list }}": "[-9223372036854775807, 0]",
		"{{ range(0, -10, -9223372036854775807) | list }}":                                   "[0]",
	} {
		if got, err := render(t, src, nil); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", src, got, err, want)
		}
	}
}

func TestRaiseException(t *testing.T) {
	t.Parallel()
	_, err := render(t, "{% if messages | length == 0 %}{{ raise_exception('No messages!') }}{% endif %}", map[string]any{"messages": NewList()})
	var ex *RaisedError
	if !errors.As(err, &ex) || ex.Message != "No messages!" {
		t.Fatalf("err = %v, want a RaisedError saying No messages!", err)
	}
}

// A list that holds itself prints, compares and fails tojson instead of
// recursing without end.
func TestSelfReference(t *testing.T) {
	t.Parallel()
	out, err := render(t, "{% set l = [1] %}{% do l.append(l) %}{{ (l | string)[:10] }}{{ l == l }}", nil)
	if err != nil || !strings.HasPrefix(out, "[1, [1, [1") {
		t.Fatalf("got %q, %v", out, err)
	}
	if _, err := render(t, "{% set l = [1] %}{% do l.append(l) %}{{ l | tojson }}", nil); err == nil {
		t.Fatal("tojson of a self-referencing list: no error")
	}
}

func TestParseJSON(t *testing.T) {
	t.Parallel()
	v, err := ParseJSON([]byte(`{"z": 1, "a": [1.0, 2, "x", null, true, {"k": -3e2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := toJSON(&b, v, &jsonOpts{itemSep: ", ", keySep: ": "}, 0); err != nil {
		t.Fatal(err)
	}
	if want := `{"z": 1, "a": [1.0, 2, "x", null, true, {"k": -300.0}]}`; b.String() != want {
		t.Fatalf("got %s, want %s", b.String(), want)
	}
	for _, bad := range []string{"", "{", `{"a": 1} x`, "[1,]", strings.Repeat("[", 2000) + strings.Repeat("]", 2000)} {
		if _, err := ParseJSON([]byte(bad)); err == nil {
			t.Errorf("ParseJSON(%.20q): no error", bad)
		}
	}
}

// Renders share a parsed template safely.
func TestConcurrentRenders(t *testing.T) {
	t.Parallel()
	tm, err := Parse("t", "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	for range 8 {
		go func() {
			out, _ := tm.Render(map[string]any{"messages": []any{1, 2, 3}}, Options{})
			done <- out
		}()
	}
	for range 8 {
		if out := <-done; out != "3" {
			t.Errorf("got %q", out)
		}
	}
}
