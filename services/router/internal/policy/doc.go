// Package policy decides which worker serves a request. It is pure logic:
// no I/O, no clocks, no logging; randomness comes from the caller, so a
// harness can replay any decision.
//
// A routing mode is a Profile: a chain of small plugins, filters → scorers
// → picker, each registered by name in a Registry value (there is no global
// registry, so two routers with different plugins can share a process).
//
//   - A Filter narrows the candidates (for example to the worker a request
//     names in its hints).
//   - A Scorer gives every remaining candidate a score in [0, 1], 1 best; a
//     profile combines several scorers by weight. Cost scorers also record
//     the candidate's cost and overlap credit, which the router reports.
//   - A Picker chooses one candidate from the scores.
//
// The KV-aware cost of a worker is
//
//	cost = prefill_load_scale × (max(active_prefill_blocks, 0) + own_prefill_weight × max(request_blocks − overlap_credit, 0)) + decode_blocks
//
// where own_prefill_weight (Params.OwnPrefillWeight, at least 1) weighs the
// request's own uncached blocks against the prefill already queued on the
// worker; overlap_credit weights the request's cached prefix by the fastest
// tier that holds each block (TierWeights, one per kvtier.Tier), plus, with
// prefix pull on, PrefixPullWeight for each further block that another
// worker holds on device and this one would copy rather than compute
// (Candidate.PeerDepth); and the loads include what the router itself
// predicted for requests it just routed. The load scorer (least-loaded
// mode) is the same cost with no overlap credit. Scores are
// 1 − cost/max_cost, so the picker's softmax over scores is the softmax
// over normalized costs.
package policy
