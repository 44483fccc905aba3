package app

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"switchyard.dev/services/frontend/internal/auth"
	"switchyard.dev/services/frontend/internal/chattmpl"
	"switchyard.dev/services/frontend/internal/httpapi"
)

// flags are the frontend's own settings.
type flags struct {
	getenv            func(string) string
	routerURLs        string
	canaryWeight      float64
	apiKeysFile       string
	rateLimit         float64
	rateBurst         int
	maxBodyBytes      int64
	migrationAttempts int
	requestTimeout    time.Duration
	chatTemplate      string
	modelAlias        string
	adminKeysFile     string
	tokensPerMinute   float64
	concurrencyLimit  int
	limitsRedisAddr   string
	limitsNamespace   string
	keysReload        time.Duration
	console           consoleFlags

	// Set by validate.
	routers   []string
	keys      []auth.Entry // API keys and admin keys, with their limits
	keySource auth.Source
	templates *chattmpl.Set
	aliases   map[string]string
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.Float64Var(&f.canaryWeight, "canary-weight", 0.1, "share of requests the routers tagged canary take while the planner publishes no router rollout, in [0, 1] (see docs/rollouts.md)")
	fs.StringVar(&f.routerURLs, "router-url", "", "comma-separated router base URLs (default: routers found in discovery)")
	fs.StringVar(&f.apiKeysFile, "api-keys-file", "", "file of accepted API keys, one per line: the key or sha256:<hex of its SHA-256>, then optional name=, rps=, burst=, tpm=, concurrency=, admin (also SWITCHYARD_API_KEYS, comma-separated); reloaded when it changes; none means no auth")
	fs.Float64Var(&f.rateLimit, "rate-limit", 0, "requests per second allowed per API key, unless its entry says rps= (0: unlimited)")
	fs.IntVar(&f.rateBurst, "rate-burst", 0, "rate-limit bucket size per API key (default: ceil(rate-limit))")
	fs.Float64Var(&f.tokensPerMinute, "tokens-per-minute", 0, "prompt plus completion tokens per minute allowed per API key, unless its entry says tpm= (0: unlimited)")
	fs.IntVar(&f.concurrencyLimit, "concurrency-limit", 0, "requests in flight at once per API key, unless its entry says concurrency= (0: unlimited)")
	fs.StringVar(&f.limitsRedisAddr, "limits-redis-addr", "", "Redis host:port keeping the per-key limits, shared by every frontend replica (default: each replica its own)")
	fs.StringVar(&f.limitsNamespace, "limits-namespace", "default", "prefix of the limits' Redis keys, to share one Redis between deployments")
	fs.DurationVar(&f.keysReload, "api-keys-reload", 5*time.Second, "how often the keys files are checked for changes")
	fs.Int64Var(&f.maxBodyBytes, "max-body-bytes", 4<<20, "largest accepted request body")
	fs.IntVar(&f.migrationAttempts, "migration-attempts", 3, "times a generation whose worker fails mid-stream is moved to another worker")
	fs.DurationVar(&f.requestTimeout, "request-timeout", 10*time.Minute, "longest one generation may run (0: no limit)")
	fs.StringVar(&f.modelAlias, "model-alias", "", "more names for served models, NAME=MODEL comma-separated (as vLLM's --served-model-name); answers echo the name asked for")
	fs.StringVar(&f.adminKeysFile, "admin-keys-file", "", "file of admin API keys, one per line (also SWITCHYARD_ADMIN_KEYS): accepted as API keys, and allowed the console's admin actions")
	f.console.register(fs)
	fs.StringVar(&f.chatTemplate, "chat-template", "plain", "chat template: plain, raw, a Jinja file (NAME.jinja) or a Hugging Face tokenizer_config.json (NAME.json), for all models or per model as model=template, comma-separated")
}

func (f *flags) validate() error {
	switch {
	case f.rateLimit < 0:
		return fmt.Errorf("-rate-limit=%v: must not be negative", f.rateLimit)
	case f.rateBurst < 0:
		return fmt.Errorf("-rate-burst=%d: must not be negative", f.rateBurst)
	case f.tokensPerMinute < 0:
		return fmt.Errorf("-tokens-per-minute=%v: must not be negative", f.tokensPerMinute)
	case f.concurrencyLimit < 0:
		return fmt.Errorf("-concurrency-limit=%d: must not be negative", f.concurrencyLimit)
	case f.keysReload <= 0:
		return fmt.Errorf("-api-keys-reload=%v: must be positive", f.keysReload)
	case f.maxBodyBytes <= 0:
		return fmt.Errorf("-max-body-bytes=%d: must be positive", f.maxBodyBytes)
	case f.migrationAttempts < 0:
		return fmt.Errorf("-migration-attempts=%d: must not be negative", f.migrationAttempts)
	case f.requestTimeout < 0:
		return fmt.Errorf("-request-timeout=%v: must not be negative", f.requestTimeout)
	}
	var err error
	if f.aliases, err = httpapi.ParseAliases(f.modelAlias); err != nil {
		return fmt.Errorf("-model-alias: %w", err)
	}
	if f.templates, err = chattmpl.Parse(f.chatTemplate); err != nil {
		return fmt.Errorf("-chat-template: %w", err)
	}
	f.keySource = auth.Source{KeysFile: f.apiKeysFile, KeysList: f.getenv("SWITCHYARD_API_KEYS"),
		AdminFile: f.adminKeysFile, AdminList: f.getenv("SWITCHYARD_ADMIN_KEYS")}
	if f.keys, err = f.keySource.Load(); err != nil {
		return fmt.Errorf("-api-keys-file / -admin-keys-file: %w", err)
	}
	if err := f.console.validate(); err != nil {
		return err
	}
	f.routers = nil
	for u := range strings.SplitSeq(f.routerURLs, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || p.Scheme != "http" || p.Host == "" {
			return fmt.Errorf("-router-url=%q: want http://host:port", u)
		}
		f.routers = append(f.routers, strings.TrimSuffix(u, "/"))
	}
	return nil
}

var errNoRouterSource = errors.New("-router-url is required with -discovery=none")
