package engine

import (
	"errors"
	"fmt"
	"sync"

	"switchyard.dev/libs/engine/constrain"
	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/engine/tokenizer"
)

// GrammarCacheSize is how many compiled JSON schemas an engine keeps,
// least recently used evicted. Clients repeat a response_format or a tool
// list request after request; a compilation (with its completion costs
// over the vocabulary) is milliseconds for a large tool list, a cache hit
// a hash of the schema text.
const GrammarCacheSize = 256

// formats is an engine's structured-output state, built on the first
// request with a format (sync.Once): the model's vocabulary as package
// constrain masks it, the json_object grammar, and the compiled schemas.
// All three are immutable or safe for concurrent use once built.
type formats struct {
	once   sync.Once
	vocab  *constrain.Vocab
	object *constrain.Grammar
	cache  *constrain.Cache
}

func (f *formats) init(tok tokenizer.Tokenizer, m executor.Model) {
	f.once.Do(func() {
		f.vocab = modelVocab(tok, m)
		f.object = constrain.JSONObject()
		f.cache = constrain.NewCache(GrammarCacheSize)
	})
}

// modelVocab is the model's vocabulary as the bytes each token emits
// mid-text: a byte fallback <0xNN> is its raw byte (Piece decodes it so),
// and the leading space a piece loses after BOS is kept, since output
// tokens follow the prompt. The one exception, a first output token right
// after a prompt that is only BOS, loses a space the matcher counted as
// leading whitespace, which JSON allows, so the text is still valid.
// Control tokens (the ids below the byte fallbacks: unk, BOS, EOS) and
// the model's stop tokens have no piece, so they never appear in a value;
// EOS ends it, allowed exactly when the value is complete.
func modelVocab(tok tokenizer.Tokenizer, m executor.Model) *constrain.Vocab {
	control := map[uint32]bool{tok.BOS(): true, tok.EOS(): true, m.BOS: true, m.EOS: true}
	for _, t := range m.StopTokens {
		control[t] = true
	}
	// Piece strips the leading space only after BOS: any other previous
	// token (here the first byte fallback) decodes a piece as mid-text.
	const midText = tokenizer.ByteOffset
	pieces := make([][]byte, m.VocabSize)
	for id := range pieces {
		if t := uint32(id); t >= tokenizer.ByteOffset && !control[t] {
			pieces[id] = tok.Piece(midText, t)
		}
	}
	return constrain.NewVocab(pieces, []uint32{m.EOS})
}

// constraintFor returns the Constraint that holds r's output to its
// Sampling.Format, nil for free text: a constrain.Matcher over the
// engine's vocabulary. Submit calls it once per request (a Matcher is
// stateful: it follows one output). Its errors are validation errors
// (ErrInvalidConstraint, field "sampling.constraint").
func (e *Engine) constraintFor(r *Request) (sample.Constraint, error) {
	g, err := e.grammarFor(r)
	if g == nil || err != nil {
		return nil, err
	}
	return g.Matcher(e.formats.vocab), nil
}

// grammarFor compiles r's format (json_object, or a JSON schema through
// the engine's cache), nil for free text. Validate calls it alone, to
// report an unusable format before a remote prefill is paid for.
//
// A max_tokens below the grammar's MinTokens is not refused: the output
// is steered as close to complete as the budget permits and ends with
// FinishLength, as OpenAI's API cuts a structured output short.
func (e *Engine) grammarFor(r *Request) (*constrain.Grammar, error) {
	f := r.Sampling.Format
	if f.IsZero() {
		return nil, nil
	}
	e.formats.init(e.tok, e.model)
	if f.JSONObject {
		return e.formats.object, nil
	}
	g, err := e.formats.cache.Schema([]byte(f.JSONSchema))
	if err != nil {
		return nil, schemaInvalid(r.ID, err)
	}
	return g, nil
}

// schemaInvalid is the validation error of a schema the compiler refused:
// the keyword, the JSON pointer of its subschema, and why (a limit's
// message names the limit and its value).
func schemaInvalid(id string, err error) error {
	se, ok := errors.AsType[*constrain.SchemaError](err)
	if !ok {
		return invalid("sampling.constraint", "request %q: %w: json_schema: %w", id, ErrInvalidConstraint, err)
	}
	path := se.Path
	if path == "" {
		path = "#"
	}
	where := "at " + path
	if se.Keyword != "" {
		where = fmt.Sprintf("keyword %q at %s", se.Keyword, path)
	}
	why := se.Msg
	if se.Err != nil {
		why += ": " + se.Err.Error()
	}
	return invalid("sampling.constraint", "request %q: %w: json_schema %s: %s", id, ErrInvalidConstraint, where, why)
}

// completer is a constraint that can tell its output is complete (a
// constrain.Matcher). A request held to one ends with FinishStop at the
// end token its matcher accepted, whatever Stop.IgnoreEOS says: after a
// complete value the grammar allows nothing but that token, so ignoring
// it would only fail the request.
type completer interface{ Done() bool }

// outOfRoom is the finish reason of r when it runs out of tokens (max
// tokens or the context): FinishLength, but FinishStop when its
// constraint's value is complete. Budget steering completes the value in
// exactly the tokens left when the model dawdles (whitespace), which
// leaves no token for EOS; the output is nonetheless whole, and a client
// that reads "length" as a cut-off value (OpenAI's SDKs refuse to parse
// it) must not be told otherwise.
func outOfRoom(r *request) FinishReason {
	if r.completer != nil && r.completer.Done() {
		return FinishStop
	}
	return FinishLength
}

// endsValue reports whether tok, just accepted by r's constraint, ended
// its value.
func (e *Engine) endsValue(r *request, tok uint32) bool {
	return r.completer != nil && tok == e.model.EOS && r.completer.Done()
}
