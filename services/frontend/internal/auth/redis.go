package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisLimiter keeps every key's buckets and requests in flight in
// Redis, so frontend replicas share one budget per key. Each decision is
// one Lua script, atomic in Redis, on Redis's own clock (TIME), so
// replicas' clocks need not agree. Requests in flight are members of a
// sorted set scored by a lease's expiry, renewed while the request runs:
// a replica that dies without releasing them frees its slots when their
// leases expire instead of holding them for good. Key names carry the
// key's SHA-256, never the key.
type redisLimiter struct {
	c      redis.UniversalClient
	prefix string
	lease  time.Duration
	log    *slog.Logger
	// downUntil (unix nanoseconds) skips Redis for a while after it
	// failed, so an outage costs each request nothing rather than a
	// timeout: the Guard admits while the limits cannot be checked.
	downUntil atomic.Int64
}

// redisBackoff is how long Redis is skipped after a failed call.
const redisBackoff = time.Second

var errRedisDown = errors.New("redis is skipped for a moment after a failed call")

func (r *redisLimiter) up() error {
	if time.Now().UnixNano() < r.downUntil.Load() {
		return errRedisDown
	}
	return nil
}

func (r *redisLimiter) failed(err error) error {
	r.downUntil.Store(time.Now().Add(redisBackoff).UnixNano())
	return err
}

// RedisConfig configures NewRedis.
type RedisConfig struct {
	Client redis.UniversalClient
	// Namespace separates deployments sharing a Redis (default "default").
	Namespace string
	// Lease is how long a request in flight holds its slot without renewal
	// (default 30s; renewed every third of it).
	Lease  time.Duration
	Logger *slog.Logger
}

// NewRedis returns a Limiter shared through Redis.
func NewRedis(cfg RedisConfig) Limiter {
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &redisLimiter{c: cfg.Client, prefix: "switchyard:limits:" + cfg.Namespace + ":", lease: cfg.Lease, log: cfg.Logger}
}

func (r *redisLimiter) keys(id [32]byte) []string {
	p := r.prefix + hex.EncodeToString(id[:])
	return []string{p + ":requests", p + ":tokens", p + ":inflight"}
}

// refill is shared by both scripts: a bucket hash (tokens, last ms)
// brought up to now at rate per second, capped at size.
const refill = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function level(k, rate, size)
  local v = redis.call('HMGET', k, 'tokens', 'last')
  local tokens, last = tonumber(v[1]), tonumber(v[2])
  if tokens == nil then return size end
  return math.min(size, tokens + math.max(0, now - last) / 1000 * rate)
end
local function store(k, tokens, ttl)
  redis.call('HSET', k, 'tokens', tostring(tokens), 'last', now)
  redis.call('PEXPIRE', k, ttl)
end
`

// admitScript: ARGV rps, burst, tpm, concurrent, member, lease ms. It
// returns {1, 0} when admitted, {0, retry ms} when not.
var admitScript = redis.NewScript(refill + `
local rps, burst, tpm, conc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local member, lease = ARGV[5], tonumber(ARGV[6])
local reqs, toks
if rps > 0 then
  reqs = level(KEYS[1], rps, burst)
  if reqs < 1 then return {0, math.ceil((1 - reqs) / rps * 1000)} end
end
if tpm > 0 then
  toks = level(KEYS[2], tpm / 60, tpm)
  if toks <= 0 then return {0, math.ceil((1 - toks) / (tpm / 60) * 1000)} end
end
if conc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('ZCARD', KEYS[3]) >= conc then return {0, 1000} end
  redis.call('ZADD', KEYS[3], now + lease, member)
  redis.call('PEXPIRE', KEYS[3], lease * 2)
end
if rps > 0 then store(KEYS[1], reqs - 1, math.ceil(burst / rps * 1000) + 1000) end
if tpm > 0 then store(KEYS[2], toks, 61000) end
return {1, 0}
`)

// chargeScript: ARGV tpm, tokens.
var chargeScript = redis.NewScript(refill + `
local tpm, n = tonumber(ARGV[1]), tonumber(ARGV[2])
store(KEYS[2], level(KEYS[2], tpm / 60, tpm) - n, 61000 + math.ceil(n / (tpm / 60) * 1000))
return 1
`)

// renewScript: ARGV member, lease ms; renews a lease still held.
var renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
end
return 1
`)

func (r *redisLimiter) Admit(ctx context.Context, id [32]byte, l Limits) (func(), time.Duration, error) {
	if l.RequestsPerSecond <= 0 && l.TokensPerMinute <= 0 && l.Concurrent <= 0 {
		return func() {}, 0, nil
	}
	if err := r.up(); err != nil {
		return nil, 0, err
	}
	keys := r.keys(id)
	member := rand.Text()
	res, err := admitScript.Run(ctx, r.c, keys, l.RequestsPerSecond, l.burst(), l.TokensPerMinute, l.Concurrent,
		member, r.lease.Milliseconds()).Int64Slice()
	if err != nil {
		return nil, 0, r.failed(fmt.Errorf("rate limits in redis: %w", err))
	}
	if len(res) != 2 {
		return nil, 0, fmt.Errorf("rate limits in redis: the script answered %v", res)
	}
	if res[0] == 0 {
		return nil, time.Duration(res[1]) * time.Millisecond, nil
	}
	if l.Concurrent <= 0 {
		return func() {}, 0, nil
	}
	// Renew the slot's lease while the request runs; release it at the end.
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(r.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(context.Background(), r.lease/3)
				if err := renewScript.Run(rctx, r.c, keys[2:], member, r.lease.Milliseconds()).Err(); err != nil {
					r.log.Warn("renewing a request's concurrency lease in redis", "err", err)
				}
				cancel()
			}
		}
	}()
	return func() {
		once.Do(func() {
			close(done)
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := r.c.ZRem(rctx, keys[2], member).Err(); err != nil {
				r.log.Warn("releasing a request's concurrency slot in redis (its lease frees it)", "err", err)
			}
		})
	}, 0, nil
}

func (r *redisLimiter) Charge(ctx context.Context, id [32]byte, l Limits, tokens int64) error {
	if l.TokensPerMinute <= 0 || tokens <= 0 {
		return nil
	}
	if err := r.up(); err != nil {
		return err
	}
	if err := chargeScript.Run(ctx, r.c, r.keys(id), l.TokensPerMinute, tokens).Err(); err != nil {
		return r.failed(fmt.Errorf("charging tokens in redis: %w", err))
	}
	return nil
}
