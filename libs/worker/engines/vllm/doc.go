// Package vllm drives a vLLM or SGLang server from a Switchyard worker:
// generation with token-id prompts and token-id output, load read from the
// engine's Prometheus metrics, and the start-up checks that the engine
// serves the model and block size the worker announces. (The engine's KV
// events are re-hashed by libs/worker/engines/rehash.)
//
// Both engines are covered by one package because the worker needs the
// same three things from each and they differ only in names: SGLang
// publishes vLLM's KV event format (its kv_events module is a copy of
// vLLM's, same msgspec structs and ZeroMQ PUB/ROUTER protocol), exposes
// the same kind of gauges under sglang: names, and serves generation with
// token ids natively. Kind selects the dialect.
//
// # Generation
//
// The frontend tokenizes and the router hashes those token ids, so the
// worker must send exactly those ids and return exactly the ids the engine
// sampled; text never crosses this package.
//
//   - vLLM: POST /v1/completions with prompt as a list of token ids,
//     stream: true, stream_options.include_usage, logprobs: 0 and
//     return_tokens_as_token_ids: true, which makes every streamed token
//     come back as the string "token_id:N" in choices[].logprobs.tokens
//     (a chunk's choices[].token_ids is read instead when a newer vLLM
//     sends it). Usage comes in the last chunk; cached prompt tokens in
//     usage.prompt_tokens_details.cached_tokens, which vLLM fills only when
//     started with --enable-prompt-tokens-details.
//   - SGLang: POST /generate with input_ids and sampling_params, stream:
//     true; chunks carry output_ids, cumulative by default or deltas with
//     --incremental-streaming-output (told apart by
//     meta_info.completion_tokens), and meta_info carries prompt_tokens,
//     completion_tokens and cached_tokens. The native endpoint is used
//     because SGLang's OpenAI completions endpoint returns text, not ids.
//
// Every sampling parameter is sent explicitly (temperature, top_p, top_k),
// because both engines otherwise fall back to the model's
// generation_config.json, and greedy output must not depend on it.
// Closing a Stream closes the HTTP response, which both engines treat as
// an abort of the request.
//
// # Load
//
// Load is read from GET /metrics: vLLM's vllm:num_requests_running,
// vllm:num_requests_waiting and vllm:kv_cache_usage_perc (before v1,
// vllm:gpu_cache_usage_perc), and vllm:cache_config_info's block_size
// label; SGLang's sglang:num_running_reqs, sglang:num_queue_reqs and
// sglang:token_usage (SGLang needs --enable-metrics). Series of one name
// (data-parallel ranks, several engines behind one server) are summed for
// counts and averaged for the usage fraction. The scrape is read line by
// line for those names only, so a line this package does not understand
// never hides the load.
//
// # Tests
//
// Neither engine can run here: the tests replay recorded responses
// (testdata/) from httptest servers. The fixtures are constructed from the
// engines' documented formats and metric names, not captured live; see
// docs/engines.md for what is and is not verified against real engines.
package vllm
