// Package constrain makes the built-in engine's structured output valid by
// construction: OpenAI's response_format json_object and json_schema
// (strict or not) and tool calls. A Grammar (JSONObject, or CompileSchema
// of a JSON Schema) is a pushdown automaton over bytes; a Matcher follows
// one generation through it and, before each sampled token, masks every
// token that cannot continue a valid output. Even a tiny model sampled at
// temperature 1 then produces a value that parses and validates, and, with
// budget steering, always finishes it within max_tokens.
//
// # Use
//
//	v := constrain.NewVocab(pieces, eos)      // once per model
//	g, err := cache.Schema(schema)            // once per schema (or constrain.JSONObject())
//	m := g.Matcher(v)                         // once per generation
//	for each step:
//		m.Mask(logits, left)                  // left: tokens that may follow this one
//		tok := sample(logits)
//		m.Accept(tok)
//
// Matcher satisfies the engine's interface{ Mask([]float32, int);
// Accept(uint32) error }. Vocab, Grammar and Cache are safe for concurrent
// use; a Matcher is not.
//
// # Output
//
// The output is exactly one JSON value (for JSONObject an object), with
// optional leading whitespace; after it only EOS is allowed, and EOS only
// then (Done). It is strict RFC 8259 JSON: valid UTF-8 across token
// boundaries (a byte-fallback vocabulary spells a character one byte a
// token; the matcher tracks the partial sequence, and rejects overlong
// forms, surrogates and code points past U+10FFFF), no raw control
// characters in strings, every escape (\" \\ \/ \b \f \n \r \t \uXXXX)
// but \u escapes of surrogates (D800-DFFF; non-BMP characters come as raw
// UTF-8, so minLength/maxLength count what a decoder counts). Caps keep a
// sampler from spinning: MaxWhitespace consecutive whitespace bytes
// outside strings, MaxIntDigits/MaxFracDigits/MaxExpDigits digits in a
// number, MaxDepth nested objects and arrays.
//
// # Budget steering
//
// Every state carries the cost of its cheapest completion, in tokens,
// assuming one token a character using the characters the vocabulary has
// as single-byte tokens (a character it lacks costs 1024, so completions
// avoid it). The cost is that of one fixed strategy (close the open string,
// emit the required properties with their cheapest values, close the
// brackets), so emitting the strategy's next character lowers it by one:
// Mask allows only tokens after which the cost is at most left, and from
// any state that fits there is always such a token. So a generation whose
// max_tokens is at least Grammar.MinTokens always ends with a complete
// value; multi-character pieces only finish sooner. When even the cheapest
// continuation does not fit (max_tokens below MinTokens), Mask allows the
// tokens whose cost is least, so the output is as close to complete as
// the budget permits (it is then cut short and not Done). If no token can
// continue at all (a vocabulary missing a needed character entirely),
// Mask leaves EOS allowed, so the generation ends.
//
// # JSON Schema subset
//
// Draft 2020-12, the subset OpenAI's strict mode uses and a little more:
//
//   - type: string, number, integer, boolean, null, object, array, and
//     arrays of them (["string","null"]). Without type, the types the
//     schema's keywords constrain (properties: object), else any value.
//   - properties, required, additionalProperties. Properties are generated
//     in the schema's order; optional ones may be skipped. Only listed
//     properties are generated, whatever additionalProperties says (absent
//     is treated as false when generating); a required name that is not
//     listed is generated after the listed ones with any value (an error if
//     additionalProperties is false). An object with no properties listed
//     is a map: any keys, values of the additionalProperties schema (any
//     value when absent or true; none, so only {}, when false).
//   - items (a schema; the tuple form is refused), minItems, maxItems;
//     no items means any values.
//   - minLength, maxLength (code points).
//   - minimum, maximum, exclusiveMinimum, exclusiveMaximum: exact for
//     integers (|bounds| clamped to MaxIntDigits digits); a bounded number
//     gets at most BoundedFracDigits digits after the point, no exponent,
//     and bounds rounded inward to that precision.
//   - enum, const (with type, which filters the values): values are emitted
//     in compact form (json.Compact of the schema's text).
//   - anyOf (alone beside annotations): a union, followed as parallel
//     parses (at most MaxHeads) until the output tells them apart; tool
//     calls are an anyOf of call shapes. allOf of a single schema.
//   - $ref to local JSON pointers (#, #/$defs/x, #/definitions/x, any
//     #/path), alone beside annotations; recursion is allowed. A reference
//     cycle with nothing in it, or a recursion with no finite instance, is a
//     SchemaError naming $ref; the runtime nesting cap is MaxDepth.
//   - Ignored annotations: $schema, $id, $comment, $defs, definitions,
//     title, description, default, examples, deprecated, readOnly,
//     writeOnly, and format (an annotation by default in 2020-12: strings
//     are not checked against it).
//
// Anything else (pattern, patternProperties, propertyNames, oneOf, not,
// if/then/else, dependentSchemas, dependentRequired, uniqueItems,
// contains, prefixItems, multipleOf, minProperties, maxProperties,
// $anchor, $dynamicRef, remote $ref...) is a *SchemaError naming the
// keyword and the JSON pointer of its subschema. oneOf is refused rather
// than read as anyOf: exclusivity cannot be guaranteed in general.
//
// Limits, each a SchemaError naming it: MaxSchemaBytes of schema text,
// MaxSchemaDepth of subschema nesting, MaxProperties properties an object,
// MaxAlternatives a union after flattening, MaxStates grammar states
// (nodes plus literal-trie nodes; an object's key tries grow with the
// square of its run of optional properties), and a smallest instance
// deeper than MaxDepth.
//
// # Design
//
// A state is a small set of parses ("heads"), each a persistent stack of
// frames (document, object, array, string, number, literal), innermost on
// top; a step copies the top frame and shares the rest, so trying a byte
// costs no copying of the stack. Each frame caches the completion cost of
// itself and everything below it, so a state's cost is a field read.
// Literals (enum values, object keys) are byte tries; an object has, for
// each position, the trie of the keys that may come next. Unions are
// flattened at compile time, and a value of a union starts one head per
// alternative that can start with its first byte. Per (Grammar, Vocab)
// pair, the costs of every node's cheapest value are computed once (a
// least fixpoint over the possibly cyclic node graph) and cached in the
// Grammar.
//
// Mask walks the vocabulary's byte trie, flattened in preorder, with the
// state: it steps the heads by each node's byte and skips the whole
// subtree of a prefix no head survives. Inside a string with nothing
// pending, the pieces that are plain string text (whole UTF-8 characters,
// no quote, backslash or control byte) are priced in one loop, and only
// the trie of the other pieces is walked. The frames a walk creates come
// from an arena reset at every Mask; Accept's come from the heap and form
// the new state.
//
// # Performance
//
// go test -run '^$' -bench . -benchtime 2s ./libs/engine/constrain, on
// 2026-12-02 on the 2-core AMD EPYC development machine (shared with other
// work); ns/token-step is one Mask plus one Accept, averaged over seeded
// random 200-token generations (temperature 1 over random logits, so
// mostly inside strings); the 512 vocabulary is stories260K's, the 32k one
// synthetic (all bytes plus random pieces of 2 to 8 bytes):
//
//	BenchmarkMask/vocab=512/json_object       7.3 µs/token-step
//	BenchmarkMask/vocab=512/tool_call         8.2 µs/token-step
//	BenchmarkMask/vocab=32k/json_object       136 µs/token-step
//	BenchmarkMask/vocab=32k/tool_call         113 µs/token-step
//	BenchmarkMaskInString/vocab=512           6.4 µs/op (synthetic; inside a string, the least pruned state)
//	BenchmarkMaskInString/vocab=32000         152 µs/op
//	BenchmarkCompileSchema (40 tools, 18 KiB) 3.1 ms (compile, then price for a 32k vocabulary)
//
// A step costs more while several parses are alive: with a union of 120
// tool shapes over the 32k vocabulary, the steps before the tool names
// diverge ({"name":"tool_) took 0.6 to 2.3 ms each.
package constrain
