package actuate

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/deptest"
)

func TestNomadConfigDefaults(t *testing.T) {
	t.Parallel()
	env := map[string]string{"NOMAD_ADDR": "http://10.0.0.1:4646/", "NOMAD_TOKEN": "tok", "NOMAD_NAMESPACE": "ns", "NOMAD_REGION": "eu"}
	for _, tc := range []struct {
		name string
		cfg  NomadConfig
		env  map[string]string
		want NomadConfig // Client not compared
		err  string
	}{
		{name: "defaults", want: NomadConfig{Addr: "http://127.0.0.1:4646", Job: "switchyard-{role}", Group: "{role}"}},
		{name: "from the environment", env: env,
			want: NomadConfig{Addr: "http://10.0.0.1:4646", Token: "tok", Namespace: "ns", Region: "eu", Job: "switchyard-{role}", Group: "{role}"}},
		{name: "fields win over the environment", env: env,
			cfg:  NomadConfig{Addr: "https://nomad:4646", Token: "t2", Namespace: "prod", Region: "us", Job: "sy-{model}-{role}", Group: "g"},
			want: NomadConfig{Addr: "https://nomad:4646", Token: "t2", Namespace: "prod", Region: "us", Job: "sy-{model}-{role}", Group: "g"}},
		{name: "address without scheme", cfg: NomadConfig{Addr: "127.0.0.1:4646"}, err: "want http(s)://host:port"},
		{name: "address without host", cfg: NomadConfig{Addr: "http://"}, err: "want http(s)://host:port"},
		{name: "unknown placeholder", cfg: NomadConfig{Job: "switchyard-{pool}"}, err: `"switchyard-{pool}": only {role} and {model}`},
		{name: "stray brace", cfg: NomadConfig{Group: "{role"}, err: "only {role} and {model}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.cfg.withDefaults(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Client == nil {
				t.Error("no default client")
			}
			got.Client = nil
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestNomadTargets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		job, group string
		pool       Pool
		want       target
	}{
		{pool: Pool{"llama-8b", "decode"}, want: target{"switchyard-decode", "decode"}},
		{pool: Pool{"llama-8b", "prefill"}, want: target{"switchyard-prefill", "prefill"}},
		{job: "{model}-{role}", group: "workers", pool: Pool{"llama-8b", "decode"}, want: target{"llama-8b-decode", "workers"}},
		{job: "fixed", group: "{role}-{model}", pool: Pool{"m", "prefill"}, want: target{"fixed", "prefill-m"}},
	} {
		a, err := NewNomad(NomadConfig{Addr: "http://127.0.0.1:1", Job: tc.job, Group: tc.group})
		if err != nil {
			t.Fatal(err)
		}
		if got := a.target(tc.pool); got != tc.want {
			t.Errorf("%q/%q of %v = %v, want %v", tc.job, tc.group, tc.pool, got, tc.want)
		}
	}
}

// fakeNomad stands in for Nomad's HTTP API, to map each of its answers:
// GET /v1/job/switchyard-decode answers job (or status/msg), POST .../scale
// answers scaleStatus/scaleMsg; requests are recorded.
type fakeNomad struct {
	mu                    sync.Mutex // the handler's goroutine writes, the test reads
	job                   string
	status, scaleStatus   int
	msg, scaleMsg         string
	requests, scaleBodies []string
}

func (f *fakeNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, fmt.Sprintf("%s %s?%s token=%s", r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Nomad-Token")))
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/job/switchyard-decode":
		if f.status != 0 {
			http.Error(w, f.msg, f.status)
			return
		}
		_, _ = io.WriteString(w, f.job)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/job/switchyard-decode/scale":
		b, _ := io.ReadAll(r.Body)
		f.scaleBodies = append(f.scaleBodies, string(b))
		if f.scaleStatus != 0 {
			http.Error(w, f.scaleMsg, f.scaleStatus)
			return
		}
		_, _ = io.WriteString(w, `{"EvalID":"e","JobModifyIndex":9}`)
	default:
		http.Error(w, "job not found", http.StatusNotFound)
	}
}

const twoDecoders = `{"ID":"switchyard-decode","Stop":false,"TaskGroups":[{"Name":"decode","Count":2,"Tasks":[{"Name":"decode"}]}]}`

func TestNomadErrorMapping(t *testing.T) {
	t.Parallel()
	decode := Pool{"m", "decode"}
	for _, tc := range []struct {
		name         string
		fake         *fakeNomad
		pool         Pool
		scaleTo      int
		replicas     int
		replicasErr  string // "" for none
		scaleErr     string
		blocked      bool
		scaleBodies  int
		wantScaleMsg string
	}{
		{name: "scale up", fake: &fakeNomad{job: twoDecoders}, pool: decode, scaleTo: 3, replicas: 2, scaleBodies: 1,
			wantScaleMsg: `{"Count":3,"Target":{"Group":"decode"},"Message":"switchyard planner: m/decode from 2 to 3"}`},
		{name: "same count opens no deployment", fake: &fakeNomad{job: twoDecoders}, pool: decode, scaleTo: 2, replicas: 2},
		{name: "active deployment", fake: &fakeNomad{job: twoDecoders, scaleStatus: 400, scaleMsg: "job scaling blocked due to active deployment"},
			pool: decode, scaleTo: 1, replicas: 2, scaleBodies: 1, blocked: true,
			scaleErr: `nomad job "switchyard-decode" group "decode": scale 2 -> 1: nomad: 400 job scaling blocked due to active deployment`},
		{name: "other 400", fake: &fakeNomad{job: twoDecoders, scaleStatus: 400, scaleMsg: "group count was greater than scaling policy maximum: 9 > 4"},
			pool: decode, scaleTo: 9, replicas: 2, scaleBodies: 1, scaleErr: "scaling policy maximum: 9 > 4"},
		{name: "no such job", fake: &fakeNomad{status: 404, msg: "job not found"}, pool: Pool{"m", "prefill"},
			replicasErr: `nomad job "switchyard-prefill" group "prefill": read job: nomad: 404 job not found (is the job registered`},
		{name: "bad token", fake: &fakeNomad{status: 403, msg: "Permission denied"}, pool: decode,
			replicasErr: `nomad job "switchyard-decode" group "decode": read job: nomad: 403 Permission denied (check $NOMAD_TOKEN`},
		{name: "no such group", fake: &fakeNomad{job: `{"TaskGroups":[{"Name":"workers","Count":1}]}`}, pool: decode,
			replicasErr: `nomad job "switchyard-decode" group "decode": the job has no such group`},
		{name: "stopped job", fake: &fakeNomad{job: `{"Stop":true,"TaskGroups":[{"Name":"decode","Count":2}]}`}, pool: decode, scaleTo: 3,
			replicas: 0, scaleErr: "the job is stopped"},
		{name: "not json", fake: &fakeNomad{job: `<html>`}, pool: decode, replicasErr: "decode answer"},
		{name: "negative", fake: &fakeNomad{job: twoDecoders}, pool: decode, scaleTo: -1, replicas: 2, scaleErr: "negative count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tc.fake)
			t.Cleanup(srv.Close)
			a, err := NewNomad(NomadConfig{Addr: srv.URL, Token: "secret", Namespace: "ns", Region: "eu"})
			if err != nil {
				t.Fatal(err)
			}
			n, err := a.Replicas(t.Context(), tc.pool)
			checkErr(t, "Replicas", err, tc.replicasErr, false)
			if err == nil && n != tc.replicas {
				t.Errorf("Replicas = %d, want %d", n, tc.replicas)
			}
			if tc.replicasErr != "" {
				tc.scaleErr = tc.replicasErr
			}
			err = a.Scale(t.Context(), tc.pool, tc.scaleTo, []string{"ignored"})
			checkErr(t, "Scale", err, tc.scaleErr, tc.blocked)
			tc.fake.mu.Lock()
			defer tc.fake.mu.Unlock()
			if len(tc.fake.scaleBodies) != tc.scaleBodies {
				t.Errorf("%d scale requests, want %d", len(tc.fake.scaleBodies), tc.scaleBodies)
			}
			if tc.wantScaleMsg != "" && tc.fake.scaleBodies[0] != tc.wantScaleMsg {
				t.Errorf("scale body %s, want %s", tc.fake.scaleBodies[0], tc.wantScaleMsg)
			}
			for _, r := range tc.fake.requests {
				if !strings.Contains(r, "?namespace=ns&region=eu token=secret") {
					t.Errorf("request %q lacks namespace, region or token", r)
				}
			}
		})
	}
}

func checkErr(t *testing.T, op string, err error, want string, blocked bool) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v", op, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: err = %v, want one containing %q", op, err, want)
	case errors.Is(err, ErrBlocked) != blocked:
		t.Errorf("%s: errors.Is(%v, ErrBlocked) = %v, want %v", op, err, !blocked, blocked)
	}
}

func TestNomadUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there now
	a, err := NewNomad(NomadConfig{Addr: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Replicas(t.Context(), Pool{"m", "decode"})
	if err == nil || !strings.Contains(err.Error(), "nomad at "+srv.URL+" unreachable") || errors.Is(err, ErrBlocked) {
		t.Fatalf("err = %v, want unreachable and not blocked", err)
	}
}

// TestNomadScalesARealJob drives a real Nomad dev agent, with a real Consul
// beside it, through the actuator: scale-up, the deployment that blocks,
// scale-down stopping the highest indexes.
func TestNomadScalesARealJob(t *testing.T) {
	t.Parallel()
	c := deptest.StartConsul(t)
	n := deptest.StartNomad(t, c.Addr)
	a, err := NewNomad(NomadConfig{Addr: n.Addr})
	if err != nil {
		t.Fatal(err)
	}
	pool := Pool{"stories", "decode"}
	const job = "switchyard-decode"
	if err := n.Do(t.Context(), http.MethodPost, "/v1/jobs", sleeperJob(job, "decode", 1), nil); err != nil {
		t.Fatal(err)
	}
	waitDeployed(t, n, job, 1)

	if err := a.Scale(t.Context(), pool, 3, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Replicas(t.Context(), pool); err != nil || got != 3 {
		t.Fatalf("Replicas after Scale(3) = %d, %v; want 3", got, err)
	}
	// The count change opened a deployment, which stays active for at least
	// min_healthy_time once the new allocations run: another change now is
	// blocked, and leaves the count alone.
	poll(t, time.Minute, "the scale-up's deployment", func() bool {
		d := latestDeployment(t, n, job)
		return d.JobVersion == 1 && d.Status == "running"
	})
	err = a.Scale(t.Context(), pool, 4, nil)
	if !errors.Is(err, ErrBlocked) || !strings.Contains(err.Error(), `"switchyard-decode"`) {
		t.Fatalf("Scale during a deployment: %v, want ErrBlocked naming the job", err)
	}
	if got, err := a.Replicas(t.Context(), pool); err != nil || got != 3 {
		t.Fatalf("Replicas after a blocked Scale = %d, %v; want 3", got, err)
	}
	waitDeployed(t, n, job, 3)

	// Scale-down: the victims are not honoured, Nomad stops the highest
	// indexes, through the task's kill_signal.
	if err := a.Scale(t.Context(), pool, 1, []string{"decode-0"}); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "allocations 1 and 2 to stop and 0 to keep running", func() bool {
		state := map[string]string{}
		for _, al := range allocs(t, n, job) {
			state[al.Name] = al.DesiredStatus + "/" + al.ClientStatus
		}
		return state[job+".decode[0]"] == "run/running" &&
			state[job+".decode[1]"] == "stop/complete" && state[job+".decode[2]"] == "stop/complete"
	})
	if got, err := a.Replicas(t.Context(), pool); err != nil || got != 1 {
		t.Fatalf("Replicas after Scale(1) = %d, %v; want 1", got, err)
	}

	// Errors name the job and group, with Nomad's answer.
	if _, err := a.Replicas(t.Context(), Pool{"stories", "prefill"}); err == nil ||
		!strings.Contains(err.Error(), `nomad job "switchyard-prefill" group "prefill": read job: nomad: 404`) {
		t.Errorf("Replicas of a missing job: %v", err)
	}
	other, _ := NewNomad(NomadConfig{Addr: n.Addr, Group: "workers"})
	if err := other.Scale(t.Context(), pool, 2, nil); err == nil || !strings.Contains(err.Error(), "no such group") {
		t.Errorf("Scale of a missing group: %v", err)
	}
}

// sleeperJob is a service job whose task sleeps until SIGTERM. Its update
// block makes each deployment last min_healthy_time past the allocations'
// start.
func sleeperJob(id, group string, count int) any {
	task := map[string]any{
		"Name": "sleep", "Driver": "raw_exec",
		"KillSignal": "SIGTERM", "KillTimeout": int64(5 * time.Second),
		"Config":    map[string]any{"command": "/bin/sh", "args": []string{"-c", `trap "exit 0" TERM; while :; do sleep 0.2; done`}},
		"Resources": map[string]any{"CPU": 20, "MemoryMB": 16},
	}
	return map[string]any{"Job": map[string]any{
		"ID": id, "Type": "service", "Datacenters": []string{"*"},
		"TaskGroups": []any{map[string]any{
			"Name": group, "Count": count, "Tasks": []any{task},
			"Update": map[string]any{
				"MaxParallel": 1, "HealthCheck": "task_states",
				"MinHealthyTime":   int64(3 * time.Second),
				"HealthyDeadline":  int64(time.Minute),
				"ProgressDeadline": int64(2 * time.Minute),
			},
		}},
	}}
}

type deployment struct {
	JobVersion uint64
	Status     string
}

func latestDeployment(t *testing.T, n *deptest.Nomad, job string) deployment {
	t.Helper()
	var d *deployment
	if err := n.Do(t.Context(), http.MethodGet, "/v1/job/"+job+"/deployment", nil, &d); err != nil {
		t.Fatal(err)
	}
	if d == nil {
		return deployment{}
	}
	return *d
}

type alloc struct{ Name, DesiredStatus, ClientStatus string }

func allocs(t *testing.T, n *deptest.Nomad, job string) []alloc {
	t.Helper()
	var as []alloc
	if err := n.Do(t.Context(), http.MethodGet, "/v1/job/"+job+"/allocations", nil, &as); err != nil {
		t.Fatal(err)
	}
	return as
}

// waitDeployed waits until the job's latest deployment succeeded with
// running allocations.
func waitDeployed(t *testing.T, n *deptest.Nomad, job string, running int) {
	t.Helper()
	poll(t, 2*time.Minute, fmt.Sprintf("%s deployed with %d running", job, running), func() bool {
		live := slices.DeleteFunc(allocs(t, n, job), func(a alloc) bool { return a.DesiredStatus != "run" || a.ClientStatus != "running" })
		return len(live) == running && latestDeployment(t, n, job).Status == "successful"
	})
}

// poll is deptest.Eventually at a pace that suits HTTP calls to an agent.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deptest.Eventually(t, timeout, what, func() bool {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
		return false
	})
}

// TestNomadEndsCanaryDeployments: a new job version with a canary waits
// for promotion; EndDeployment promotes it (the deployment succeeds), and
// fails the next one (the deployment fails).
func TestNomadEndsCanaryDeployments(t *testing.T) {
	t.Parallel()
	c := deptest.StartConsul(t)
	n := deptest.StartNomad(t, c.Addr)
	a, err := NewNomad(NomadConfig{Addr: n.Addr})
	if err != nil {
		t.Fatal(err)
	}
	const job = "switchyard-router"
	submit := func(version string) {
		t.Helper()
		spec := sleeperJob(job, "router", 2)
		g := spec.(map[string]any)["Job"].(map[string]any)["TaskGroups"].([]any)[0].(map[string]any)
		g["Update"].(map[string]any)["Canary"] = 1
		g["Update"].(map[string]any)["MinHealthyTime"] = int64(time.Second)
		g["Tasks"].([]any)[0].(map[string]any)["Env"] = map[string]string{"VERSION": version}
		if err := n.Do(t.Context(), http.MethodPost, "/v1/jobs", spec, nil); err != nil {
			t.Fatal(err)
		}
	}
	submit("1")
	waitDeployed(t, n, job, 2)
	if err := a.EndDeployment(t.Context(), "prefill", true); err == nil || !strings.Contains(err.Error(), "no deployment to end") {
		t.Errorf("EndDeployment of a missing job: %v", err)
	}

	for _, promote := range []bool{true, false} {
		v := map[bool]string{true: "2", false: "3"}[promote]
		submit(v)
		var d deployment
		poll(t, time.Minute, "the canary's deployment to wait for promotion", func() bool {
			d = latestDeployment(t, n, job)
			return d.Status == "running" && healthyCanaries(t, n, job) == 1
		})
		if err := a.EndDeployment(t.Context(), "router", promote); err != nil {
			t.Fatalf("EndDeployment(promote=%v): %v", promote, err)
		}
		want := map[bool]string{true: "successful", false: "failed"}[promote]
		poll(t, 2*time.Minute, "the deployment to become "+want, func() bool {
			return latestDeployment(t, n, job).Status == want
		})
	}
	if err := a.EndDeployment(t.Context(), "router", false); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("EndDeployment of an ended deployment: %v", err)
	}
}

// healthyCanaries counts the healthy canaries of job's latest deployment.
func healthyCanaries(t *testing.T, n *deptest.Nomad, job string) int {
	t.Helper()
	var d struct {
		TaskGroups map[string]struct {
			PlacedCanaries []string
			HealthyAllocs  int
		}
	}
	if err := n.Do(t.Context(), http.MethodGet, "/v1/job/"+job+"/deployment", nil, &d); err != nil {
		t.Fatal(err)
	}
	h := 0
	for _, g := range d.TaskGroups {
		if len(g.PlacedCanaries) > 0 {
			h += min(g.HealthyAllocs, len(g.PlacedCanaries))
		}
	}
	return h
}
