package httpapi

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"switchyard.dev/services/frontend/internal/catalog"
)

// ParseAliases reads -model-alias: NAME=MODEL pairs, comma-separated.
// A client may ask for a model by any of its names (as vLLM's
// --served-model-name gives a model several); the answer echoes the name
// asked for, and /v1/models lists every name of every model served.
func ParseAliases(s string) (map[string]string, error) {
	out := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, model, ok := strings.Cut(pair, "=")
		name, model = strings.TrimSpace(name), strings.TrimSpace(model)
		switch {
		case !ok || name == "" || model == "":
			return nil, fmt.Errorf("%q: want NAME=MODEL", pair)
		case name == model:
			return nil, fmt.Errorf("%q: a name that is its model's own", pair)
		case out[name] != "":
			return nil, fmt.Errorf("%q: %s is already a name of %s", pair, name, out[name])
		}
		out[name] = model
	}
	for name, model := range out {
		if _, chained := out[model]; chained {
			return nil, fmt.Errorf("%s=%s: %s is itself an alias; name the model", name, model, model)
		}
	}
	return out, nil
}

// aliased is a catalog that also answers to the models' aliases.
type aliased struct {
	Catalog
	names map[string]string // alias → model
}

// Get implements Catalog: an alias resolves to its model (whose Name is
// the model's own, which workers and routers know it by).
func (c aliased) Get(ctx context.Context, model string) (*catalog.Model, error) {
	if m, ok := c.names[model]; ok {
		model = m
	}
	return c.Catalog.Get(ctx, model)
}

// Models implements Catalog: each served model, then its aliases.
func (c aliased) Models(ctx context.Context) []catalog.Entry {
	models := c.Catalog.Models(ctx)
	out := slices.Clone(models)
	names := slices.Sorted(maps.Keys(c.names))
	for _, n := range names {
		for _, e := range models {
			if e.Name == c.names[n] {
				out = append(out, catalog.Entry{Name: n, Created: e.Created})
			}
		}
	}
	return out
}
