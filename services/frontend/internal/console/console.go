// Package console serves the mesh's live web console under /console/:
// one page (plain HTML and JS, embedded, so it works offline and needs no
// build step) and its data API under /console/api/. The data is the
// shared snapshot of package fleet; the console never polls the mesh on a
// viewer's behalf. Reading needs an API key when the frontend has keys;
// the admin actions, draining a worker and clearing its prefix cache,
// need an admin key.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"switchyard.dev/services/frontend/internal/fleet"
	"switchyard.dev/services/frontend/internal/openai"
	"switchyard.dev/services/frontend/internal/reqtrace"
)

// Prefix is where the console is mounted.
const Prefix = "/console/"

//go:embed static
var static embed.FS

// Source is the snapshot the console serves (a *fleet.Collector).
type Source interface {
	Latest() *fleet.Frame
}

// Guard authenticates console requests (an *auth.Guard).
type Guard interface {
	Check(r *http.Request) *openai.Error
	Admin(r *http.Request) bool
}

// Drainer drains one instance by its discovery ID.
type Drainer interface {
	Drain(ctx context.Context, id string) (Drained, error)
}

// Drained says what a drain did.
type Drained struct {
	ID   string `json:"id"`
	Pool string `json:"pool"`
}

// ErrUnknownInstance is returned by a Drainer that does not manage the
// instance.
var ErrUnknownInstance = errors.New("console: instance not managed by the supervisor")

// Config configures the console.
type Config struct {
	Source Source
	// Guard is nil when the frontend has no keys: reads are open and
	// nobody is an admin.
	Guard Guard
	// Drainer is nil without a supervisor: drain answers 501.
	Drainer Drainer
	// Operator clears workers' prefix caches and reads the routers'
	// indexes; nil without discovery: those answer 501.
	Operator Operator
	// Traces are the sampled requests' timelines (nil: none sampled).
	Traces *reqtrace.Ring
	// Stop, when closed, ends every event stream: the frontend closes it
	// when it stops taking work, so open consoles do not hold its drain
	// (a page reconnects to another frontend, or retries). Nil: never.
	Stop <-chan struct{}
	// Heartbeat is how often an idle event stream gets a comment, so
	// proxies keep it open; default 15 s.
	Heartbeat time.Duration
	Logger    *slog.Logger
}

// New returns the console's handler, to be mounted at Prefix.
func New(cfg Config) http.Handler {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &console{cfg: cfg}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix, http.StripPrefix(Prefix, http.FileServerFS(sub)))
	mux.HandleFunc("GET "+Prefix+"api/snapshot", c.read(c.snapshot))
	mux.HandleFunc("GET "+Prefix+"api/events", c.read(c.events))
	mux.HandleFunc("GET "+Prefix+"api/whoami", c.read(c.whoami))
	mux.HandleFunc("POST "+Prefix+"api/drain", c.read(c.drain))
	mux.HandleFunc("POST "+Prefix+"api/clear-cache", c.read(c.clearCache))
	mux.HandleFunc("GET "+Prefix+"api/index", c.read(c.index))
	mux.HandleFunc("GET "+Prefix+"api/traces", c.read(c.traces))
	mux.HandleFunc("POST "+Prefix+"api/cordon", c.read(c.cordon))
	mux.HandleFunc("POST "+Prefix+"api/rollout", c.read(c.setRollout))
	mux.HandleFunc("POST "+Prefix+"api/rollout/end", c.read(c.endRollout))
	return mux
}

type console struct{ cfg Config }

// read authenticates every API call.
func (c *console) read(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if c.cfg.Guard != nil {
			if e := c.cfg.Guard.Check(r); e != nil {
				if e.RetryAfter > 0 {
					w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds()+0.999)))
				}
				writeJSON(w, e.Status, e)
				return
			}
		}
		h(w, r)
	}
}

func (c *console) admin(r *http.Request) bool { return c.cfg.Guard != nil && c.cfg.Guard.Admin(r) }

func (c *console) snapshot(w http.ResponseWriter, _ *http.Request) {
	f := c.cfg.Source.Latest()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Console-Seq", strconv.FormatUint(f.Seq, 10))
	_, _ = w.Write(f.JSON)
}

// whoami tells the page which controls to show.
func (c *console) whoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"admin": c.admin(r), "drain": c.cfg.Drainer != nil})
}

type drainRequest struct {
	ID string `json:"id"`
}

func (c *console) drain(w http.ResponseWriter, r *http.Request) {
	if !c.admin(r) {
		writeJSON(w, http.StatusForbidden, &openai.Error{Status: http.StatusForbidden, Type: "permission_error",
			Message: "Draining needs an admin API key."})
		return
	}
	if c.cfg.Drainer == nil {
		writeJSON(w, http.StatusNotImplemented, &openai.Error{Status: http.StatusNotImplemented, Type: "unsupported",
			Message: "No supervisor is configured (-supervisor-url): this frontend cannot drain workers."})
		return
	}
	var req drainRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil || req.ID == "" {
		writeJSON(w, http.StatusBadRequest, openai.Invalid("id", "Want a JSON body {\"id\": \"<instance id>\"}."))
		return
	}
	d, err := c.cfg.Drainer.Drain(r.Context(), req.ID)
	switch {
	case errors.Is(err, ErrUnknownInstance):
		writeJSON(w, http.StatusNotFound, &openai.Error{Status: http.StatusNotFound, Type: "not_found", Message: err.Error()})
		return
	case err != nil:
		writeJSON(w, http.StatusBadGateway, &openai.Error{Status: http.StatusBadGateway, Type: "upstream_error", Message: err.Error()})
		return
	}
	c.cfg.Logger.Info("console drain", "instance", d.ID, "pool", d.Pool, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, d)
}

func (c *console) clearCache(w http.ResponseWriter, r *http.Request) {
	var req drainRequest
	if !c.operate(w, r, "Clearing a prefix cache", &req) {
		return
	}
	if req.ID == "" {
		writeJSON(w, http.StatusBadRequest, openai.Invalid("id", `Want a JSON body {"id": "<worker id>"}.`))
		return
	}
	res, err := c.cfg.Operator.ClearPrefixCache(r.Context(), req.ID)
	if c.operateError(w, err) {
		return
	}
	c.cfg.Logger.Info("console clear prefix cache", "instance", res.ID, "kv_blocks_freed", res.BlocksFreed, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, res)
}

// index serves GET api/index?worker=ID[&limit=N]: every router's index
// of the worker.
func (c *console) index(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Operator == nil {
		writeJSON(w, http.StatusNotImplemented, &openai.Error{Status: http.StatusNotImplemented, Type: "unsupported",
			Message: "This frontend runs without discovery: it cannot find the routers."})
		return
	}
	id := r.URL.Query().Get("worker")
	if id == "" {
		writeJSON(w, http.StatusBadRequest, openai.Invalid("worker", "Want ?worker=<worker id>."))
		return
	}
	var limit uint64
	if s := r.URL.Query().Get("limit"); s != "" {
		var err error
		if limit, err = strconv.ParseUint(s, 10, 32); err != nil || limit > 10000 {
			writeJSON(w, http.StatusBadRequest, openai.Invalid("limit", "Want 0 to 10000 hashes."))
			return
		}
	}
	res, err := c.cfg.Operator.WorkerIndex(r.Context(), id, uint32(limit))
	if err != nil {
		writeJSON(w, http.StatusBadGateway, &openai.Error{Status: http.StatusBadGateway, Type: "upstream_error", Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"worker": id, "routers": res})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (c *console) setRollout(w http.ResponseWriter, r *http.Request) {
	var req RolloutChange
	if !c.operate(w, r, "Changing a canary rollout", &req) {
		return
	}
	if req.Role == "" || req.Version == "" {
		writeJSON(w, http.StatusBadRequest, openai.Invalid("role", `Want a JSON body {"role": "decode", "version": "<canary version>", "weight": 0.1, "judge": true}.`))
		return
	}
	res, err := c.cfg.Operator.SetRollout(r.Context(), req)
	if c.operateError(w, err) {
		return
	}
	c.cfg.Logger.Info("console rollout set", "role", res.Role, "version", res.Version, "weight", res.Weight, "judge", res.Judge, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, res)
}

func (c *console) endRollout(w http.ResponseWriter, r *http.Request) {
	var req RolloutEnd
	if !c.operate(w, r, "Ending a canary rollout", &req) {
		return
	}
	if req.Role == "" {
		writeJSON(w, http.StatusBadRequest, openai.Invalid("role", `Want a JSON body {"role": "decode", "promote": true}.`))
		return
	}
	res, err := c.cfg.Operator.EndRollout(r.Context(), req)
	if c.operateError(w, err) {
		return
	}
	c.cfg.Logger.Info("console rollout ended", "role", res.Role, "version", res.Version, "state", res.State, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, res)
}

// operate checks an admin action's key and operator and decodes its
// body into req; false when it has answered.
func (c *console) operate(w http.ResponseWriter, r *http.Request, what string, req any) bool {
	if !c.admin(r) {
		writeJSON(w, http.StatusForbidden, &openai.Error{Status: http.StatusForbidden, Type: "permission_error",
			Message: what + " needs an admin API key."})
		return false
	}
	if c.cfg.Operator == nil {
		writeJSON(w, http.StatusNotImplemented, &openai.Error{Status: http.StatusNotImplemented, Type: "unsupported",
			Message: "This frontend runs without discovery: it cannot reach the planner or the workers."})
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		writeJSON(w, http.StatusBadRequest, openai.Invalid("body", "The body is not the JSON this action takes: %v.", err))
		return false
	}
	return true
}

// operateError answers an operator's error; false when there is none.
func (c *console) operateError(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrRefused):
		writeJSON(w, http.StatusBadRequest, &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: err.Error()})
	case errors.Is(err, ErrNoWorker):
		writeJSON(w, http.StatusNotFound, &openai.Error{Status: http.StatusNotFound, Type: "not_found", Message: err.Error()})
	default:
		writeJSON(w, http.StatusBadGateway, &openai.Error{Status: http.StatusBadGateway, Type: "upstream_error", Message: err.Error()})
	}
	return true
}

type cordonRequest struct {
	ID       string `json:"id"`
	Cordoned bool   `json:"cordoned"`
}

// cordon stops or resumes new requests to a worker that stays up.
func (c *console) cordon(w http.ResponseWriter, r *http.Request) {
	var req cordonRequest
	if !c.operate(w, r, "Cordoning a worker", &req) {
		return
	}
	if req.ID == "" {
		writeJSON(w, http.StatusBadRequest, openai.Invalid("id", `Want a JSON body {"id": "<worker id>", "cordoned": true}.`))
		return
	}
	res, err := c.cfg.Operator.Cordon(r.Context(), req.ID, req.Cordoned)
	if c.operateError(w, err) {
		return
	}
	c.cfg.Logger.Info("console cordon", "instance", res.ID, "cordoned", res.Cordoned, "running", res.Running, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, res)
}

// traces lists the sampled requests' timelines, newest first.
func (c *console) traces(w http.ResponseWriter, _ *http.Request) {
	out := []reqtrace.Trace{}
	if c.cfg.Traces != nil {
		out = c.cfg.Traces.Recent()
	}
	writeJSON(w, http.StatusOK, map[string]any{"traces": out})
}
