// Package catalog knows which models the frontend can serve and how to
// tokenize for each.
//
// Models come from discovery: every healthy decode or prefill instance
// advertises its model. The first request for a model fetches
// GetModelInfo from one of its workers and builds the tokenizer from the
// bytes the worker sends, so the frontend's token ids match the worker's
// exactly; the result is cached until the model's last worker leaves.
// Without discovery (-discovery none) the catalog asks the router for a
// worker instead, and lists the models it has resolved so far.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/frontend/internal/chattmpl"
)

// ErrUnknownModel means no healthy worker serves the model.
var ErrUnknownModel = errors.New("catalog: unknown model")

// Model is a servable model with its tokenizer.
type Model struct {
	Name    string
	Info    *workerv1.GetModelInfoResponse
	Tok     tokenizer.Tokenizer
	Created time.Time // when the frontend first saw it
	// Template is the model's own chat template (GetModelInfo's
	// chat_template, compiled), nil when it ships none. One that does not
	// compile is kept as a template that fails every render with that
	// error, so chat requests say why while completions still serve.
	Template chattmpl.Template
}

// Entry is a model as listed by /v1/models.
type Entry struct {
	Name    string
	Created time.Time
}

// Dialer returns a worker client for a base URL.
type Dialer interface {
	Worker(baseURL string) workerv1connect.WorkerServiceClient
}

// Locator finds a worker of a model without discovery (the router).
type Locator func(ctx context.Context, model string) (baseURL string, err error)

// Config configures a Catalog.
type Config struct {
	Registry discovery.Registry // nil: use Locate
	Locate   Locator
	Dialer   Dialer
	Logger   *slog.Logger
	Now      func() time.Time
}

type entry struct {
	urls    []string // guarded by Catalog.mu
	created time.Time

	fetching chan struct{} // a lock (one slot) held while fetching; waiters keep their ctx
	model    atomic.Pointer[Model]
}

func newEntry(urls []string, created time.Time) *entry {
	return &entry{urls: urls, created: created, fetching: make(chan struct{}, 1)}
}

// Catalog is safe for concurrent use.
type Catalog struct {
	cfg Config

	mu     sync.Mutex
	models map[string]*entry
	ready  chan struct{}
}

// New returns a catalog; call Run to follow discovery.
func New(cfg Config) *Catalog {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Catalog{cfg: cfg, models: make(map[string]*entry), ready: make(chan struct{})}
	if cfg.Registry == nil {
		close(c.ready)
	}
	return c
}

// Run follows the decode and prefill instances in discovery until ctx
// ends. It returns once the watches are set up. The model set is replaced
// only once both roles have reported, so a model served by one role is not
// dropped just because the other was not seen yet.
func (c *Catalog) Run(ctx context.Context) error {
	if c.cfg.Registry == nil {
		return nil
	}
	roles := []string{discovery.RoleDecode, discovery.RolePrefill}
	err := discovery.WatchRoles(ctx, c.cfg.Registry, c.cfg.Logger, roles, func(latest map[string][]discovery.Instance) {
		if len(latest) == len(roles) {
			c.update(latest[discovery.RoleDecode], latest[discovery.RolePrefill])
		}
	})
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	return nil
}

// update replaces the model set. Decode workers come first in each list:
// they serve GetModelInfo whatever the deployment.
func (c *Catalog) update(dec, pre []discovery.Instance) {
	urls := map[string][]string{}
	for _, in := range slices.Concat(dec, pre) {
		if in.Model != "" {
			urls[in.Model] = append(urls[in.Model], in.URL())
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, e := range c.models {
		if _, ok := urls[name]; !ok {
			delete(c.models, name) // last worker left: forget the tokenizer too
		} else {
			e.urls = urls[name]
		}
	}
	for name, u := range urls {
		if _, ok := c.models[name]; !ok {
			c.models[name] = newEntry(u, c.cfg.Now())
		}
	}
	select {
	case <-c.ready:
	default:
		close(c.ready)
	}
}

// Models lists the servable models, sorted by name.
func (c *Catalog) Models(ctx context.Context) []Entry {
	c.waitReady(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Entry, 0, len(c.models))
	for name, e := range c.models {
		if c.cfg.Registry == nil && e.model.Load() == nil {
			continue
		}
		out = append(out, Entry{Name: name, Created: e.created})
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// waitReady waits briefly for the first discovery snapshot, so requests
// arriving just after start do not see an empty catalog.
func (c *Catalog) waitReady(ctx context.Context) {
	select {
	case <-c.ready: // after start: no timer per request
		return
	default:
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-c.ready:
	case <-ctx.Done():
	case <-t.C:
	}
}
