#!/usr/bin/env python3
"""Infinite-cache prefix hit ratio of a Mooncake trace prefix (used by bench.sh).

  scripts/trace-ceiling.py TRACE [LIMIT] [MAX_INPUT_TOKENS]

Replays the first LIMIT records (0: all) into one cache that never evicts and
prints JSON with two ceilings:

  block_ceiling  fraction of hash blocks (512 tokens each) whose prefix was seen
                 before: the trace's own definition (conversation 36.64%,
                 synthetic 63.96% over the whole file).
  token_ceiling  what the engine could at best report as cached_tokens /
                 prompt_tokens for loadtest's replay of the same records: prompts
                 cut to input_length (and MAX_INPUT_TOKENS), reuse in whole
                 16-token KV blocks, and never the block that holds the last
                 prompt token (it is recomputed for the logits). This is the
                 number to hold the measured cache hit ratio against.
"""
import json
import sys

TRACE_BLOCK = 512  # tokens per hash id
KV_BLOCK = 16      # the workers' -block-size


def main():
    path = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    cap = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    seen = set()   # hash ids seen (ids are prefix-chained: an id names its prefix)
    cached = {}    # hash id -> tokens of its block held in whole KV blocks
    blocks = hits = prompt = hit_tokens = n_req = 0
    with open(path) as f:
        for line in f:
            if limit and n_req >= limit:
                break
            if not line.strip():
                continue
            r = json.loads(line)
            n_req += 1
            ids = r["hash_ids"]
            # Block ceiling: leading run of ids seen before.
            run = 0
            while run < len(ids) and ids[run] in seen:
                run += 1
            blocks += len(ids)
            hits += run
            seen.update(ids)
            # Token ceiling for loadtest's synthesized prompt.
            n = min(r["input_length"], len(ids) * TRACE_BLOCK)
            if cap:
                n = min(n, cap)
            n = max(n, 1)
            got = 0
            for i, h in enumerate(ids):
                want = min(TRACE_BLOCK, n - i * TRACE_BLOCK)
                if want <= 0:
                    break
                have = cached.get(h, 0)
                got += min(have, want)
                if have < want:
                    break
            got = min(got, (n - 1) // KV_BLOCK * KV_BLOCK)
            prompt += n
            hit_tokens += got
            for i, h in enumerate(ids):
                full = min(TRACE_BLOCK, n - i * TRACE_BLOCK) // KV_BLOCK * KV_BLOCK
                if full <= 0:
                    break
                cached[h] = max(cached.get(h, 0), full)
    json.dump({
        "trace": path, "requests": n_req, "max_input_tokens": cap,
        "blocks": blocks, "block_hits": hits,
        "block_ceiling": round(hits / blocks, 4) if blocks else 0,
        "prompt_tokens": prompt, "cached_tokens": hit_tokens,
        "token_ceiling": round(hit_tokens / prompt, 4) if prompt else 0,
        "unique_kv_tokens": sum(cached.values()),
    }, sys.stdout)
    print()


if __name__ == "__main__":
    main()
