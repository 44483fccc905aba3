// Package spec is the supervisor's description of a local stack: the pools
// of processes to run, in start order, how to tell that one is ready, and
// which may be scaled. A spec is JSON, written by scripts/run-local.sh
// from `make run`'s variables, and is checked whole before anything
// starts: a mistake is reported with the pool and field it is in.
//
// A pool's command and readiness check are templates: {i} is the
// instance's index in its pool, {id} its name ("decode-{i}" by default),
// {port} its port (the pool's port plus {i}). An instance keeps its index
// over restarts; a new one takes the lowest free index, so names and
// ports are reused as instances come and go, as a Nomad allocation's
// index is.
package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Spec is a whole stack.
type Spec struct {
	// Logs is the directory each instance's output is appended to, as
	// <id>.log.
	Logs string `json:"logs"`
	// StopTimeout bounds how long an instance may take to exit after
	// SIGTERM (its drain) before it is killed; default 30s.
	StopTimeout Duration `json:"stop_timeout,omitempty"`
	// Banner is printed once every pool's first instances are ready.
	Banner string `json:"banner,omitempty"`
	// PrometheusTargets, when set, is a file the supervisor keeps as a
	// Prometheus file_sd target list of every instance with a port,
	// rewritten whenever an instance is added or goes away, so scaled
	// replicas are scraped too (deploy/prometheus/local.yml reads it).
	PrometheusTargets string `json:"prometheus_targets,omitempty"`
	Pools             []Pool `json:"pools"`
}

// Pool is one kind of process.
type Pool struct {
	Name string `json:"name"`
	// ID names an instance; default "<name>-{i}".
	ID string `json:"id,omitempty"`
	// Command is the program and its arguments, templated.
	Command []string `json:"command"`
	// Env adds NAME=value pairs to the supervisor's environment.
	Env []string `json:"env,omitempty"`
	// Count is how many instances start with the stack (default 1).
	Count *int `json:"count,omitempty"`
	// Port is the first instance's port ({port} = Port + {i}); 0: none.
	Port int `json:"port,omitempty"`
	// Scalable pools take AddInstances and RemoveInstance, between Min
	// (default 0) and Max (default Count).
	Scalable bool `json:"scalable,omitempty"`
	Min      int  `json:"min,omitempty"`
	Max      int  `json:"max,omitempty"`
	// Ready is how to tell an instance is ready; none: once started.
	Ready *Ready `json:"ready,omitempty"`
	// Wait holds back the pools after this one until its first instances
	// are ready (a dependency, such as Consul).
	Wait bool `json:"wait,omitempty"`
	// Service is the service label of the pool's Prometheus targets
	// (default Name): two pools of one service share it.
	Service string `json:"service,omitempty"`
}

// Ready is a readiness check, polled every 200 ms.
type Ready struct {
	// HTTP is a URL that must answer 2xx (templated).
	HTTP string `json:"http,omitempty"`
	// Contains, with HTTP, must occur in the body.
	Contains string `json:"contains,omitempty"`
	// Exec is a command that must exit 0 (templated).
	Exec []string `json:"exec,omitempty"`
	// Timeout bounds the first readiness of the stack's instances
	// (default 60s): past it the stack does not start.
	Timeout Duration `json:"timeout,omitempty"`
}

// Duration is a time.Duration written as Go writes it ("30s").
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("duration %s is negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Limits on a spec, so that a typo cannot ask for a million processes.
const (
	MaxPools     = 64
	MaxInstances = 256 // a pool's Max
)

var (
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	// placeholders are the only {...} a template may hold.
	placeholderRE = regexp.MustCompile(`\{[^{}]*\}`)
)

// Parse decodes and checks a spec. Unknown fields are errors: a misspelt
// field would otherwise be silently ignored.
func Parse(b []byte) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("spec: data after the spec's object")
	}
	if err := s.normalize(); err != nil {
		return nil, err
	}
	return &s, nil
}

// normalize fills defaults and checks every field.
func (s *Spec) normalize() error {
	if s.Logs == "" {
		return errors.New("spec: logs: a directory is needed")
	}
	if s.StopTimeout == 0 {
		s.StopTimeout = Duration(30 * time.Second)
	}
	switch {
	case len(s.Pools) == 0:
		return errors.New("spec: pools: none")
	case len(s.Pools) > MaxPools:
		return fmt.Errorf("spec: pools: %d, at most %d", len(s.Pools), MaxPools)
	}
	seen := map[string]bool{}
	ports := map[int]string{}
	for i := range s.Pools {
		p := &s.Pools[i]
		if err := p.normalize(); err != nil {
			return fmt.Errorf("spec: pool %d (%q): %w", i, p.Name, err)
		}
		if seen[p.Name] {
			return fmt.Errorf("spec: pool %d: name %q used twice", i, p.Name)
		}
		seen[p.Name] = true
		if p.Port == 0 {
			continue
		}
		for k := range p.Max {
			if other, ok := ports[p.Port+k]; ok {
				return fmt.Errorf("spec: pool %q: port %d is also pool %q's", p.Name, p.Port+k, other)
			}
			ports[p.Port+k] = p.Name
		}
	}
	return nil
}

func (p *Pool) normalize() error {
	if !nameRE.MatchString(p.Name) {
		return errors.New("name: want lower-case letters, digits and '-', starting with a letter, at most 63")
	}
	if p.ID == "" {
		p.ID = p.Name + "-{i}"
	}
	if p.Service == "" {
		p.Service = p.Name
	} else if !nameRE.MatchString(p.Service) {
		return errors.New("service: want lower-case letters, digits and '-', starting with a letter, at most 63")
	}
	if len(p.Command) == 0 || p.Command[0] == "" {
		return errors.New("command: a program is needed")
	}
	count := 1
	if p.Count != nil {
		count = *p.Count
	}
	if count < 0 {
		return fmt.Errorf("count %d is negative", count)
	}
	p.Count = &count
	if !p.Scalable {
		// A fixed pool's bounds are its count (as a parsed spec writes
		// them back); any other is a mistake.
		if (p.Min != 0 && p.Min != count) || (p.Max != 0 && p.Max != count) {
			return errors.New("min and max are for scalable pools")
		}
		p.Min, p.Max = count, count
	} else if p.Max == 0 {
		p.Max = max(count, 1)
	}
	switch {
	case p.Min < 0 || p.Max > MaxInstances || p.Min > p.Max:
		return fmt.Errorf("min %d, max %d: want 0 ≤ min ≤ max ≤ %d", p.Min, p.Max, MaxInstances)
	case count < p.Min || count > p.Max:
		return fmt.Errorf("count %d outside [min %d, max %d]", count, p.Min, p.Max)
	case p.Port < 0 || p.Port+p.Max-1 > math.MaxUint16:
		return fmt.Errorf("port %d: its instances' ports must lie in 1..65535", p.Port)
	case p.Max > 1 && !strings.Contains(p.ID, "{i}"):
		return fmt.Errorf("id %q: a pool of several instances needs {i} in it", p.ID)
	}
	for _, kv := range p.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("env %q: want NAME=value", kv)
		}
	}
	templates := append([]string{p.ID}, p.Command...)
	if r := p.Ready; r != nil {
		switch {
		case (r.HTTP == "") == (len(r.Exec) == 0):
			return errors.New("ready: want one of http and exec")
		case r.Contains != "" && r.HTTP == "":
			return errors.New("ready: contains is for http")
		}
		if r.Timeout == 0 {
			r.Timeout = Duration(60 * time.Second)
		}
		templates = append(append(templates, r.HTTP), r.Exec...)
	}
	for _, t := range templates {
		for _, ph := range placeholderRE.FindAllString(t, -1) {
			switch ph {
			case "{i}", "{id}", "{port}":
			default:
				return fmt.Errorf("%q: unknown placeholder %s (want {i}, {id} or {port})", t, ph)
			}
		}
		if strings.Contains(t, "{id}") && t == p.ID {
			return fmt.Errorf("id %q refers to itself", p.ID)
		}
	}
	return nil
}

// Instance is what an instance's templates expand with.
type Instance struct {
	Index int
	ID    string
	Port  int // 0: the pool has none
}

// Instance returns the names of instance i of the pool.
func (p *Pool) Instance(i int) Instance {
	in := Instance{Index: i}
	if p.Port != 0 {
		in.Port = p.Port + i
	}
	in.ID = in.expand(p.ID)
	return in
}

// Expand fills a template's placeholders.
func (in Instance) Expand(t string) string {
	return strings.ReplaceAll(in.expand(t), "{id}", in.ID)
}

func (in Instance) expand(t string) string {
	return strings.NewReplacer("{i}", strconv.Itoa(in.Index), "{port}", strconv.Itoa(in.Port)).Replace(t)
}

// ExpandAll fills every template of ts.
func (in Instance) ExpandAll(ts []string) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = in.Expand(t)
	}
	return out
}
