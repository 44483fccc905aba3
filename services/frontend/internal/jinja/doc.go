// Package jinja renders Jinja templates the way Hugging Face's
// apply_chat_template does, for models' chat templates: the
// tokenizer_config.json chat_template or GGUF tokenizer.chat_template a
// model ships, which the frontend turns into the prompt text the model
// was trained on. Byte-exact output is the point: one stray space or
// newline is a different prompt.
//
// # Why our own engine
//
// github.com/ardanlabs/jinja (v1.8.0, the newest that builds with our
// Go) was tried first on llama.cpp's chat-template vectors and real
// templates. It rendered most, but not exactly: whitespace control
// reached across expressions ("a {{ x }}{%- if %}" ate the space before
// the expression; "{{- x -}}{{ y }} z" the space after y), lstrip_blocks
// stripped indentation before {{ }} tags too, tojson(indent=...) sorted
// the keys, 1.0 printed as 1 and -7 % 3 gave -1. Those change prompts.
// It also has no bound on work: a self-recursive macro overflows the Go
// stack, which kills the process rather than failing the render. So
// this package implements the subset of Jinja that chat templates use,
// with Python's semantics, and a budget on every render.
//
// # What it implements
//
// Environment as Hugging Face sets it up: trim_blocks and lstrip_blocks
// on, "-" and "+" whitespace control, loop controls (break, continue),
// {% generation %} rendering as its body. Statements: if/elif/else, for
// (with unpacking, an if filter, else, the loop object), set (names,
// tuples, namespace attributes, blocks), macro (defaults, keyword
// arguments), filter blocks, do, raw, comments. Expressions: literals,
// lists, dicts, conditional expressions, and/or/not, comparison chains,
// in, is tests, arithmetic with Python's semantics (// and % floor, / is
// true division), ~, slices, calls, filters. Values print as Python's
// str() does (None, True, 1.0, ['a']). Globals: range, dict, namespace,
// joiner, raise_exception (an *RaisedError carrying the template's
// message) and strftime_now. tojson is Hugging Face's: json.dumps with
// ensure_ascii off and keys in insertion order, indent, separators and
// sort_keys honored. from_json is llama.cpp's addition for DeepSeek's
// templates. Python methods on strings (strip, split, startswith,
// replace, title, format, ...), dicts (items, get, keys, ...) and lists
// (append, pop, ...). Not implemented: template inheritance and
// includes, call blocks, recursive loops, autoescaping. Undefined
// values behave as Jinja's default Undefined: empty when printed, false,
// an error when looked into.
//
// # Limits
//
// Templates come from operators and models, never from requests, but a
// render's cost still grows with the conversation and a careless (or
// hostile) template must not take the frontend down. Every render runs
// under Limits: steps (statements, expressions, loop iterations), bytes
// of strings built, and macro call depth; parsing bounds block and
// expression nesting. Past a limit a render fails with ErrLimit. Nothing
// a template does panics; the fuzz tests hold the package to that.
package jinja
