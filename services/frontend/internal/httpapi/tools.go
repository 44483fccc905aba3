package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"

	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
)

// toolReply reads a chat reply as tool calls, where the request's tools
// ask for them, and holds the state of one streamed reply.
//
// A forced reply (tool_choice "required" or a named function) is a call
// by construction: callScanner follows it, and each call goes out once
// its name is complete, its arguments as they are generated. Cut short
// (finish "length"), the calls named so far are the reply, their
// arguments as far as they got; with no name complete yet it is text.
//
// An "auto" reply is free text: it is a call when the whole reply
// (trimmed) is one, in the shape the prompt asked for, naming an offered
// function with an object as arguments (autoCalls). A stream cannot know
// that before the end, so a reply whose first non-blank byte is '{' or
// '[' is held back until it finishes; any other goes out as text at
// once.
type toolReply struct {
	use   *openai.ToolUse
	newID func() string

	text strings.Builder
	held []generate.Logprob // of text not sent yet
	scan *callScanner       // forced replies
	mode replyMode
}

type replyMode uint8

const (
	modeUndecided replyMode = iota // nothing but blanks yet
	modeCandidate                  // auto: could be a call, held back
	modeCalls                      // forced: a call is going out
	modeText                       // text, as without tools
)

func newToolReply(use *openai.ToolUse, newID func() string) *toolReply {
	t := &toolReply{use: use, newID: newID}
	if use.Forced() {
		t.scan = newCallScanner(use.Parallel)
	}
	return t
}

// whole returns a complete reply's calls and finish reason; ok is false
// when the reply is text.
func (t *toolReply) whole(text, finish string) (calls []openai.ToolCall, reason string, ok bool) {
	if t.scan == nil {
		calls, ok = t.autoCalls(text, finish)
		return calls, openai.FinishToolCalls, ok
	}
	t.scan.feed(text)
	for _, c := range t.scan.named() {
		calls = append(calls, openai.ToolCall{ID: t.callID(c), Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: c.name, Arguments: string(c.args)}})
	}
	return calls, t.forcedFinish(finish), len(calls) > 0
}

// forcedFinish is a forced reply's finish reason: "tool_calls" when the
// calls are complete, else why it ended ("length").
func (t *toolReply) forcedFinish(finish string) string {
	if finish == openai.FinishStop && t.scan.done() {
		return openai.FinishToolCalls
	}
	return finish
}

func (t *toolReply) callID(c *scannedCall) string {
	if c.id == "" {
		c.id = t.newID()
	}
	return c.id
}

// autoCalls reads an "auto" reply: one call object, or an array of calls
// (of one call unless parallel calls are allowed), each exactly
// {"name","arguments"} with an offered name and an object as arguments.
// The arguments are not checked against the parameters: only a forced
// reply is held to them.
func (t *toolReply) autoCalls(text, finish string) ([]openai.ToolCall, bool) {
	body := bytes.TrimSpace([]byte(text))
	if finish != openai.FinishStop || len(body) == 0 {
		return nil, false
	}
	var raws []json.RawMessage
	switch body[0] {
	case '{':
		raws = []json.RawMessage{body}
	case '[':
		if json.Unmarshal(body, &raws) != nil || len(raws) == 0 || len(raws) > 1 && !t.use.Parallel {
			return nil, false
		}
	default:
		return nil, false
	}
	calls := make([]openai.ToolCall, len(raws))
	for i, raw := range raws {
		var c struct {
			Name      *string         `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if dec.Decode(&c) != nil || dec.More() || c.Name == nil || !t.use.Offers(*c.Name) ||
			len(c.Arguments) == 0 || c.Arguments[0] != '{' {
			return nil, false
		}
		calls[i] = openai.ToolCall{ID: t.newID(), Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: *c.Name, Arguments: string(c.Arguments)}}
	}
	return calls, true
}

// start is the stream's first chunk: the role, and no content for a
// forced reply.
func (t *toolReply) start(f chatFormat, c call) any {
	if t.scan != nil {
		return f.chunk(c, openai.ChatDelta{Role: "assistant"}, nil, nil)
	}
	empty := ""
	return f.chunk(c, openai.ChatDelta{Role: "assistant", Content: &empty}, nil, nil)
}

// delta takes the next text of a stream and returns what to send now:
// nil, a chunk, or several ([]any).
func (t *toolReply) delta(f chatFormat, c call, text string, lps []generate.Logprob) any {
	t.text.WriteString(text)
	t.held = append(t.held, lps...)
	switch t.mode {
	case modeText:
		return t.textChunk(f, c, text)
	case modeCandidate:
		return nil
	}
	if t.scan == nil {
		rest := strings.TrimLeft(t.text.String(), " \t\r\n")
		switch {
		case rest == "":
			return nil
		case rest[0] == '{' || rest[0] == '[':
			t.mode = modeCandidate
			return nil
		}
		t.mode = modeText
		return t.textChunk(f, c, t.text.String())
	}
	t.scan.feed(text)
	if t.scan.bad() && len(t.scan.named()) == 0 {
		t.mode = modeText
		return t.textChunk(f, c, t.text.String())
	}
	return t.callChunk(f, c)
}

// finish ends a stream: what is still held, then the finish chunk.
func (t *toolReply) finish(f chatFormat, c call, reason string, lps []generate.Logprob) any {
	t.held = append(t.held, lps...)
	var out []any
	switch {
	case t.mode == modeCalls:
		if ch := t.callChunk(f, c); ch != nil {
			out = append(out, ch)
		}
		reason = t.forcedFinish(reason)
	case t.mode == modeCandidate && t.scan == nil:
		if calls, ok := t.autoCalls(t.text.String(), reason); ok {
			out = append(out, t.autoChunks(f, c, calls)...)
			reason = openai.FinishToolCalls
			break
		}
		fallthrough
	case t.mode != modeText && t.text.Len() > 0:
		out = append(out, t.textChunk(f, c, t.text.String()))
	}
	out = append(out, f.chunk(c, openai.ChatDelta{}, &reason, t.take()))
	return out
}

// textChunk sends text with the held logprobs.
func (t *toolReply) textChunk(f chatFormat, c call, text string) any {
	t.mode = modeText
	return f.chunk(c, openai.ChatDelta{Content: &text}, nil, t.take())
}

// callChunk sends what the scanner has that was not sent: each newly
// named call's id, type and name, and the arguments since the last
// chunk; nil when there is nothing new.
func (t *toolReply) callChunk(f chatFormat, c call) any {
	var deltas []openai.ToolCallDelta
	for i, sc := range t.scan.named() {
		if sc.announced && sc.sent == len(sc.args) {
			continue
		}
		d := openai.ToolCallDelta{Index: i, Function: openai.FunctionCallDelta{Arguments: string(sc.args[sc.sent:])}}
		if !sc.announced {
			d.ID, d.Type, d.Function.Name = t.callID(sc), openai.ToolTypeFunction, sc.name
			sc.announced = true
		}
		sc.sent = len(sc.args)
		deltas = append(deltas, d)
	}
	if len(deltas) == 0 {
		return nil
	}
	t.mode = modeCalls
	return f.chunk(c, openai.ChatDelta{ToolCalls: deltas}, nil, t.take())
}

// autoChunks sends complete calls as OpenAI streams them: the call's id
// and name with empty arguments, then the arguments.
func (t *toolReply) autoChunks(f chatFormat, c call, calls []openai.ToolCall) []any {
	out := make([]any, 0, 2*len(calls))
	for i, tc := range calls {
		out = append(out,
			f.chunk(c, openai.ChatDelta{ToolCalls: []openai.ToolCallDelta{{Index: i, ID: tc.ID, Type: tc.Type,
				Function: openai.FunctionCallDelta{Name: tc.Function.Name}}}}, nil, nil),
			f.chunk(c, openai.ChatDelta{ToolCalls: []openai.ToolCallDelta{{Index: i,
				Function: openai.FunctionCallDelta{Arguments: tc.Function.Arguments}}}}, nil, nil))
	}
	return out
}

// take returns the held logprob entries and holds none.
func (t *toolReply) take() []generate.Logprob {
	lps := t.held
	t.held = nil
	return lps
}
