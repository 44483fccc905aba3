// Package auth checks API keys and limits each key's use: requests per
// second, prompt and completion tokens per minute, and requests in
// flight.
//
// Keys are optional: with none configured every request is anonymous and
// shares one set of limits. Keys are kept only as SHA-256 digests (a keys
// file may list the digests alone, "sha256:<hex>", so it holds no
// secrets) and compared by digest, so lookup time does not depend on how
// much of a guessed key matches. The key table is swapped whole on
// Reload, so a changed keys file takes effect without a restart and
// without a request seeing half of it. A key may hold the admin role: it
// is accepted wherever a key is, and it alone may take the console's
// admin actions (draining a worker). Without admin keys nobody is an
// admin.
//
// Limits live in a Limiter: this process's own (NewLocal), or Redis
// (NewRedis), shared by every frontend replica, so a key's budget is the
// fleet's, not each replica's.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"switchyard.dev/services/frontend/internal/openai"
)

// Config configures a Guard.
type Config struct {
	// Entries are the accepted keys with their own limits; Keys and
	// AdminKeys add keys given in the clear with the default limits. None
	// at all disables authentication.
	Entries   []Entry
	Keys      []string
	AdminKeys []string
	// Defaults are the limits of keys (and of anonymous requests) that do
	// not set their own. Rate and Burst, when set, give its
	// RequestsPerSecond and RequestBurst.
	Defaults Limits
	Rate     float64
	Burst    int
	// Limiter keeps the limits' state; nil is NewLocal(Now).
	Limiter Limiter
	// Now is the clock, for tests.
	Now    func() time.Time
	Logger *slog.Logger
}

// Guard authenticates requests and admits them under their key's limits;
// it is safe for concurrent use.
type Guard struct {
	defaults Limits
	lim      Limiter
	log      *slog.Logger
	table    atomic.Pointer[table]
}

// table is the key set in force.
type table struct {
	keys map[[32]byte]Entry // nil: no authentication
}

// New returns a Guard.
func New(cfg Config) *Guard {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rate > 0 {
		cfg.Defaults.RequestsPerSecond = cfg.Rate
	}
	if cfg.Burst > 0 {
		cfg.Defaults.RequestBurst = cfg.Burst
	}
	if cfg.Limiter == nil {
		cfg.Limiter = NewLocal(cfg.Now)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Guard{defaults: cfg.Defaults, lim: cfg.Limiter, log: cfg.Logger}
	entries := append([]Entry(nil), cfg.Entries...)
	for _, k := range cfg.Keys {
		entries = append(entries, clearEntry(k, false))
	}
	for _, k := range cfg.AdminKeys {
		entries = append(entries, clearEntry(k, true))
	}
	g.Reload(entries)
	return g
}

func clearEntry(key string, admin bool) Entry {
	id := sha256.Sum256([]byte(key))
	return Entry{ID: id, Name: hex.EncodeToString(id[:4]), Admin: admin}
}

// Reload replaces the accepted keys (none: no authentication). Requests
// in flight keep the entry they were admitted with. A key listed twice
// keeps the later entry, the admin role if either has it.
func (g *Guard) Reload(entries []Entry) {
	t := &table{}
	if len(entries) > 0 {
		t.keys = make(map[[32]byte]Entry, len(entries))
		for _, e := range entries {
			if old, ok := t.keys[e.ID]; ok && old.Admin {
				e.Admin = true
			}
			t.keys[e.ID] = e
		}
	}
	g.table.Store(t)
}

// Ticket is an admitted request: Done releases its slot among the key's
// requests in flight, Charge takes the tokens it used from the key's
// token budget.
type Ticket struct {
	g       *Guard
	id      [32]byte
	name    string
	limits  Limits
	release func()
}

// Charge takes tokens from the key's token budget. A nil Ticket charges
// nothing.
func (t *Ticket) Charge(ctx context.Context, tokens int64) {
	if t == nil {
		return
	}
	if err := t.g.lim.Charge(ctx, t.id, t.limits, tokens); err != nil {
		t.g.log.WarnContext(ctx, "charging a request's tokens", "key", t.name, "tokens", tokens, "err", err)
	}
}

// Done ends the request; later calls do nothing.
func (t *Ticket) Done() {
	if t != nil && t.release != nil {
		t.release()
	}
}

// Admit authenticates r and admits it under its key's limits. It returns
// a Ticket to end with Done, or a 401 or 429 *openai.Error (Retry-After
// set). A Limiter that fails (Redis down) admits the request and logs it:
// a limit that cannot be checked does not take the API down.
func (g *Guard) Admit(r *http.Request) (*Ticket, *openai.Error) {
	e, oerr := g.authenticate(r)
	if oerr != nil {
		return nil, oerr
	}
	l := e.limits(g.defaults)
	release, retry, err := g.lim.Admit(r.Context(), e.ID, l)
	switch {
	case err != nil:
		g.log.WarnContext(r.Context(), "rate limits unavailable; admitting the request", "key", e.Name, "err", err)
		return &Ticket{g: g, id: e.ID, name: e.Name, limits: l}, nil
	case retry > 0:
		return nil, openai.RateLimited(retry)
	}
	return &Ticket{g: g, id: e.ID, name: e.Name, limits: l, release: release}, nil
}

// Check is Admit for a request that holds no slot and uses no tokens
// (console reads): authentication and the request rate only.
func (g *Guard) Check(r *http.Request) *openai.Error {
	e, oerr := g.authenticate(r)
	if oerr != nil {
		return oerr
	}
	l := e.limits(g.defaults)
	l.TokensPerMinute, l.Concurrent = 0, 0
	release, retry, err := g.lim.Admit(r.Context(), e.ID, l)
	switch {
	case err != nil:
		g.log.WarnContext(r.Context(), "rate limits unavailable; admitting the request", "key", e.Name, "err", err)
	case retry > 0:
		return openai.RateLimited(retry)
	default:
		release()
	}
	return nil
}

// Admin reports whether r carries an admin key. It does not limit:
// callers check the request with Check first.
func (g *Guard) Admin(r *http.Request) bool {
	key, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return false
	}
	e, ok := g.table.Load().keys[sha256.Sum256([]byte(key))]
	return ok && e.Admin
}

var anonymous = Entry{Name: "anonymous"}

func (g *Guard) authenticate(r *http.Request) (Entry, *openai.Error) {
	t := g.table.Load()
	if t.keys == nil {
		return anonymous, nil
	}
	key, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return Entry{}, openai.Unauthorized("Missing API key: send it as 'Authorization: Bearer <key>'.")
	}
	e, ok := t.keys[sha256.Sum256([]byte(key))]
	if !ok {
		return Entry{}, openai.Unauthorized("Incorrect API key provided.")
	}
	return e, nil
}

func bearer(h string) (string, bool) {
	scheme, key, ok := strings.Cut(h, " ")
	key = strings.TrimSpace(key)
	return key, ok && strings.EqualFold(scheme, "Bearer") && key != ""
}

type ticketKey struct{}

// WithTicket returns ctx carrying t, for the handler to charge.
func WithTicket(ctx context.Context, t *Ticket) context.Context {
	return context.WithValue(ctx, ticketKey{}, t)
}

// TicketFrom is the Ticket in ctx, or nil.
func TicketFrom(ctx context.Context) *Ticket {
	t, _ := ctx.Value(ticketKey{}).(*Ticket)
	return t
}
