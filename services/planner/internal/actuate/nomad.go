package actuate

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// NomadConfig says which Nomad to talk to and which job and task group run
// a pool. Empty fields take Nomad's own environment variables, like the
// nomad CLI, then the defaults below.
type NomadConfig struct {
	// Addr is the HTTP API's base URL: $NOMAD_ADDR, else
	// http://127.0.0.1:4646.
	Addr string
	// Token is the ACL token sent as X-Nomad-Token: $NOMAD_TOKEN, else none.
	// It needs the namespace's read-job and scale-job capabilities.
	Token string
	// Namespace and Region: $NOMAD_NAMESPACE and $NOMAD_REGION, else
	// Nomad's defaults (the agent's region, namespace "default").
	Namespace, Region string
	// Job and Group map a pool to the job id and task group that run it:
	// templates where {role} is the pool's role and {model} its model.
	// Defaults: "switchyard-{role}" and "{role}", what deploy/nomad uses.
	Job, Group string
	// Client sends the requests; default: one with a 10 s timeout.
	Client *http.Client
}

// Default templates: deploy/nomad/switchyard.nomad.hcl run with
// -var service=decode is job "switchyard-decode", group "decode".
const (
	DefaultNomadJob   = "switchyard-{role}"
	DefaultNomadGroup = "{role}"
)

// RegisterFlags adds -nomad-addr, -nomad-namespace, -nomad-region,
// -nomad-job and -nomad-group to fs. The token has no flag (a flag shows
// in ps): it comes from $NOMAD_TOKEN.
func (c *NomadConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "nomad-addr", c.Addr, "Nomad HTTP API address (default $NOMAD_ADDR, else http://127.0.0.1:4646)")
	fs.StringVar(&c.Namespace, "nomad-namespace", c.Namespace, "Nomad namespace of the workers' jobs (default $NOMAD_NAMESPACE)")
	fs.StringVar(&c.Region, "nomad-region", c.Region, "Nomad region (default $NOMAD_REGION, else the agent's)")
	fs.StringVar(&c.Job, "nomad-job", c.Job, "job id of a pool, {role} and {model} replaced (default "+DefaultNomadJob+")")
	fs.StringVar(&c.Group, "nomad-group", c.Group, "task group of a pool in its job, {role} and {model} replaced (default "+DefaultNomadGroup+")")
}

// withDefaults fills the empty fields from getenv, then the defaults, and
// checks the templates.
func (c NomadConfig) withDefaults(getenv func(string) string) (NomadConfig, error) {
	fill := func(v *string, env, def string) {
		if *v == "" && env != "" {
			*v = getenv(env)
		}
		if *v == "" {
			*v = def
		}
	}
	fill(&c.Addr, "NOMAD_ADDR", "http://127.0.0.1:4646")
	fill(&c.Token, "NOMAD_TOKEN", "")
	fill(&c.Namespace, "NOMAD_NAMESPACE", "")
	fill(&c.Region, "NOMAD_REGION", "")
	fill(&c.Job, "", DefaultNomadJob)
	fill(&c.Group, "", DefaultNomadGroup)
	u, err := url.Parse(c.Addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("actuate: nomad address %q: want http(s)://host:port", c.Addr)
	}
	c.Addr = strings.TrimRight(c.Addr, "/")
	for _, tmpl := range []string{c.Job, c.Group} {
		if err := checkTemplate(tmpl); err != nil {
			return c, err
		}
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: 10 * time.Second}
	}
	return c, nil
}

// checkTemplate accepts text with {role} and {model} and no other braces.
func checkTemplate(tmpl string) error {
	rest := strings.NewReplacer("{role}", "", "{model}", "").Replace(tmpl)
	if strings.ContainsAny(rest, "{}") {
		return fmt.Errorf("actuate: nomad template %q: only {role} and {model} may be replaced", tmpl)
	}
	return nil
}

func expand(tmpl string, p Pool) string {
	return strings.NewReplacer("{role}", p.Role, "{model}", p.Model).Replace(tmpl)
}

// Nomad scales pools that run as task groups of Nomad service jobs,
// through Nomad's HTTP API.
//
// Replicas is the group's count as the job has it: what Nomad is asked
// to run and converges to (it replaces failed allocations, and places
// those waiting for capacity when capacity comes), so Scale(n) is
// followed by Replicas n at once, not after the allocations start; a
// stopped job has 0. Allocations Nomad cannot place yet count too: the
// planner sees what actually serves through discovery, and the count is
// the intent it compares its own against.
//
// Scale sets the count. Every count change opens a deployment, and Nomad
// refuses another while one is active (also while a canary awaits
// promotion): that answer is an error wrapping ErrBlocked, and the
// planner asks again next interval. A scale-down cannot honour its
// victims: Nomad stops the allocations of highest index, which get the
// task's kill_signal (SIGTERM), leave discovery and finish their streams
// within -drain-timeout. The job's kill_timeout must exceed the services'
// -deregister-grace plus -drain-timeout, or Nomad's SIGKILL cuts streams;
// the client's max_kill_timeout (30 s by default) caps kill_timeout.
type Nomad struct {
	cfg NomadConfig
}

var _ Actuator = (*Nomad)(nil)

// NewNomad returns the actuator of cfg's Nomad. It does not call Nomad: an
// unreachable address shows at the first Replicas or Scale.
func NewNomad(cfg NomadConfig) (*Nomad, error) {
	c, err := cfg.withDefaults(os.Getenv)
	if err != nil {
		return nil, err
	}
	return &Nomad{cfg: c}, nil
}

// target is where a pool runs.
type target struct{ job, group string }

func (t target) String() string { return fmt.Sprintf("nomad job %q group %q", t.job, t.group) }

func (n *Nomad) target(p Pool) target {
	return target{job: expand(n.cfg.Job, p), group: expand(n.cfg.Group, p)}
}

// nomadJob is the part of GET /v1/job/:id the actuator reads.
type nomadJob struct {
	Stop       bool
	TaskGroups []struct {
		Name  string
		Count int
	}
}

// count reads the group's count, and whether the job is stopped.
func (n *Nomad) count(ctx context.Context, t target) (count int, stopped bool, err error) {
	var job nomadJob
	if err := n.call(ctx, http.MethodGet, "/v1/job/"+url.PathEscape(t.job), nil, &job); err != nil {
		return 0, false, fmt.Errorf("actuate: %s: read job: %w", t, err)
	}
	for _, g := range job.TaskGroups {
		if g.Name == t.group {
			return g.Count, job.Stop, nil
		}
	}
	return 0, false, fmt.Errorf("actuate: %s: the job has no such group", t)
}

// Replicas implements Actuator: the group's count, 0 if the job is stopped.
func (n *Nomad) Replicas(ctx context.Context, p Pool) (int, error) {
	count, stopped, err := n.count(ctx, n.target(p))
	if stopped {
		return 0, err
	}
	return count, err
}

// Scale implements Actuator. victims are ignored (see Nomad). A count
// already at n is left alone, so asking again opens no deployment.
func (n *Nomad) Scale(ctx context.Context, p Pool, count int, _ []string) error {
	t := n.target(p)
	if count < 0 {
		return fmt.Errorf("actuate: %s: scale to %d: negative count", t, count)
	}
	cur, stopped, err := n.count(ctx, t)
	switch {
	case err != nil:
		return err
	case stopped:
		return fmt.Errorf("actuate: %s: the job is stopped; run it again before the planner can scale it", t)
	case cur == count:
		return nil
	}
	body := scaleRequest{Count: count, Message: fmt.Sprintf("switchyard planner: %s from %d to %d", p, cur, count)}
	body.Target.Group = t.group
	err = n.call(ctx, http.MethodPost, "/v1/job/"+url.PathEscape(t.job)+"/scale", body, nil)
	if err != nil {
		return fmt.Errorf("actuate: %s: scale %d -> %d: %w", t, cur, count, err)
	}
	return nil
}

type scaleRequest struct {
	Count   int
	Target  struct{ Group string }
	Message string
}

// nomadError is an answer of Nomad's other than 2xx; Nomad's message is
// plain text.
type nomadError struct {
	status int
	msg    string
}

func (e *nomadError) Error() string {
	switch e.status {
	case http.StatusForbidden:
		return fmt.Sprintf("nomad: %d %s (check $NOMAD_TOKEN and its namespace capabilities)", e.status, e.msg)
	case http.StatusNotFound:
		return fmt.Sprintf("nomad: %d %s (is the job registered, in this namespace and region?)", e.status, e.msg)
	}
	return fmt.Sprintf("nomad: %d %s", e.status, e.msg)
}

// blocked is Nomad's answer to a scale during an active deployment.
const blocked = "blocked due to active deployment"

// Unwrap makes errors.Is(err, ErrBlocked) hold for that answer.
func (e *nomadError) Unwrap() error {
	if e.status == http.StatusBadRequest && strings.Contains(e.msg, blocked) {
		return ErrBlocked
	}
	return nil
}

// call sends one request to Nomad: in as JSON if not nil, the answer
// decoded into out if not nil.
func (n *Nomad) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	q := url.Values{}
	if n.cfg.Namespace != "" {
		q.Set("namespace", n.cfg.Namespace)
	}
	if n.cfg.Region != "" {
		q.Set("region", n.cfg.Region)
	}
	u := n.cfg.Addr + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if n.cfg.Token != "" {
		req.Header.Set("X-Nomad-Token", n.cfg.Token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := n.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("nomad at %s unreachable: %w", n.cfg.Addr, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("nomad at %s: read answer: %w", n.cfg.Addr, err)
	}
	if res.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(b))
		if len(msg) > 512 {
			msg = msg[:512] + "…"
		}
		return &nomadError{status: res.StatusCode, msg: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("nomad at %s: decode answer: %w", n.cfg.Addr, err)
	}
	return nil
}

// nomadDeployment is the part of a deployment the actuator reads.
type nomadDeployment struct {
	ID     string
	Status string
}

// EndDeployment promotes (all groups' canaries) or fails the latest
// deployment of role's job, which must be running; promoting one that
// already succeeded (auto_promote, or promoted by hand) is done.
func (n *Nomad) EndDeployment(ctx context.Context, role string, promote bool) error {
	t := n.target(Pool{Role: role})
	var d *nomadDeployment
	if err := n.call(ctx, http.MethodGet, "/v1/job/"+url.PathEscape(t.job)+"/deployment", nil, &d); err != nil {
		return fmt.Errorf("actuate: %s: read deployment: %w", t, err)
	}
	switch {
	case d == nil || d.ID == "":
		return fmt.Errorf("actuate: %s: no deployment to end", t)
	case promote && d.Status == "successful":
		return nil
	case d.Status != "running" && d.Status != "paused":
		return fmt.Errorf("actuate: %s: deployment %s is %s, not running", t, d.ID, d.Status)
	}
	path, body := "/v1/deployment/fail/"+url.PathEscape(d.ID), map[string]any{"DeploymentID": d.ID}
	if promote {
		path, body = "/v1/deployment/promote/"+url.PathEscape(d.ID), map[string]any{"DeploymentID": d.ID, "All": true}
	}
	if err := n.call(ctx, http.MethodPost, path, body, nil); err != nil {
		return fmt.Errorf("actuate: %s: end deployment %s: %w", t, d.ID, err)
	}
	return nil
}
