// Package profile is the measured input of the planner's throughput model:
// how long one model takes, on one executor, to prefill a prompt and to
// produce a token at a given batch size and context length. The
// `planner profile` command measures it and writes it as JSON with Save; the
// planner reads it with Load and asks it for latencies at loads it never
// measured.
//
// A profile is a handful of points, not a formula, because the shape of the
// curves depends on the executor (a GPU is memory-bound at small batches and
// compute-bound at large ones; the simulator is linear), and a formula
// fitted to one would be wrong for the other. Between points the package
// interpolates linearly; past the ends it extrapolates linearly through the
// last two points, with floors that keep a latency from falling when the
// work grows:
//
//   - PrefillSeconds interpolates on input tokens and never returns less
//     than the smallest measured seconds per token times the tokens asked
//     for, so extrapolating below the first point cannot reach zero.
//   - DecodeITL interpolates bilinearly over (batch, context). The decode
//     points are rows, one per context length, each sorted by batch; rows
//     need not share their batch sizes (a long context may fit only small
//     batches). Below a row's smallest batch the ITL is flat; past its
//     largest it grows linearly, never falls. A row measured at one batch
//     size borrows its shape in batch from the nearest row with two. Past
//     the longest context the ITL grows linearly with context, never falls;
//     below the shortest it is flat, which overstates it a little (safe for
//     a planner).
//   - MaxBatchWithin is the largest batch that meets an ITL target at every
//     batch up to it and whose KV blocks fit the cache.
//
// The file is versioned (Version). Decode rejects unknown fields, so a typo
// in a hand-edited profile is an error rather than a silently missing
// measurement, and a file of another version is refused by its version
// number before its fields are looked at.
package profile
