// Package openai is the wire format of the frontend's OpenAI-compatible
// API: request and response types, decoding with range checks, and the
// error envelope.
//
// It has no I/O and knows nothing of models or workers, so it can be fuzzed
// on its own: a decoder either returns a request whose fields are all in
// range, or an *Error with status 400 naming the offending parameter. The
// OpenAPI document at /openapi.json is generated from these types by
// reflection, so the field comments and tags here are the API reference.
package openai
