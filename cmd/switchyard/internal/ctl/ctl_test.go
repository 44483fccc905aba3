package ctl

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const snapshotJSON = `{"seq":7,"instances":[
 {"id":"decode-0","role":"decode","model":"tiny","version":"v1","address":"127.0.0.1:9200","health":"passing",
  "load":{"running":3,"waiting":1,"pending_prefill_tokens":0,"kv":[{"name":"device","used":12,"total":100},{"name":"host","total":4096}]}},
 {"id":"decode-1","role":"decode","model":"tiny","version":"v2","address":"127.0.0.1:9201","canary":true,"health":"unreachable"},
 {"id":"router-0","role":"router","version":"v1","address":"127.0.0.1:9000","health":"passing"}],
 "plan":{"reason":"planning","leader":true,"pools":[{"model":"tiny","role":"decode","observed":2,"desired":3,"rule":"reactive","reason":"ttft over target","pending":true}],
  "rollouts":[{"role":"decode","version":"v2","weight":0.25,"judge":true,"state":"judging","reason":"passed, stepped to weight 0.25",
   "canary":{"requests":40,"errors":1,"ttft_p50":0.2},"baseline":{"requests":400,"errors":2,"ttft_p50":0.1}}]},
 "latency":[],"errors":["planner planner-1: unavailable"]}`

// fakeConsole answers the console API as a frontend does: snapshot to
// any key, drain to "admin" only.
func fakeConsole(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/api/snapshot", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"Missing API key"}}`)
			return
		}
		_, _ = io.WriteString(w, snapshotJSON)
	})
	mux.HandleFunc("POST /console/api/drain", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer admin" {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":{"message":"Draining needs an admin API key."}}`)
			return
		}
		var req struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		_, _ = io.WriteString(w, `{"id":"`+req.ID+`","pool":"decode"}`)
	})
	mux.HandleFunc("POST /console/api/cordon", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID       string
			Cordoned bool
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		_ = json.NewEncoder(w).Encode(map[string]any{"id": req.ID, "cordoned": req.Cordoned, "running_requests": 2})
	})
	mux.HandleFunc("POST /console/api/rollout", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Role, Version string
			Weight        float64
			Judge         bool
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		state := map[bool]string{true: "judging", false: "holding"}[req.Judge]
		_ = json.NewEncoder(w).Encode(map[string]any{"role": req.Role, "version": req.Version, "weight": req.Weight, "state": state, "reason": "set"})
	})
	mux.HandleFunc("POST /console/api/rollout/end", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Role    string
			Promote bool
			Reason  string
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Role != "decode" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"rollout: no active rollout of the role: \"`+req.Role+`\""}}`)
			return
		}
		state, weight := "aborted", 0.0
		if req.Promote {
			state, weight = "promoted", 1
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"role": req.Role, "version": "v2", "weight": weight, "state": state, "reason": req.Reason})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestCommands(t *testing.T) {
	t.Parallel()
	srv := fakeConsole(t)
	for _, tc := range []struct {
		name    string
		args    []string
		key     string
		code    int
		want    []string
		wantErr string
		notWant string
	}{
		{name: "instances", args: []string{"instances"}, key: "user", want: []string{
			"decode-0", "device=12/100 host=4096", "unreachable", "canary", "router-0", "warning: planner planner-1"}},
		{name: "instances by role", args: []string{"instances", "-role", "router"}, key: "user", want: []string{"router-0"}, notWant: "decode-0"},
		{name: "instances json", args: []string{"-json", "instances"}, key: "user", want: []string{`"seq": 7`}},
		{name: "no key", args: []string{"instances"}, code: 1, wantErr: "Missing API key"},
		{name: "plan", args: []string{"plan"}, key: "user", want: []string{"planning", "3 (pending)", "ttft over target"}},
		{name: "drain", args: []string{"drain", "decode-0"}, key: "admin", want: []string{"draining decode-0 (pool decode)"}},
		{name: "drain as user", args: []string{"drain", "decode-0"}, key: "user", code: 1, wantErr: "admin API key"},
		{name: "drain without id", args: []string{"drain"}, key: "admin", code: 2, wantErr: "usage: drain ID"},
		{name: "cordon", args: []string{"cordon", "decode-0"}, key: "admin", want: []string{"cordoned decode-0: no new requests; 2 still running"}},
		{name: "uncordon", args: []string{"uncordon", "decode-0"}, key: "admin", want: []string{"uncordoned decode-0"}},
		{name: "cordon without id", args: []string{"cordon"}, key: "admin", code: 2, wantErr: "usage: cordon ID"},
		{name: "rollouts", args: []string{"rollouts"}, key: "user", want: []string{"decode", "v2", "0.25", "judging", "40/1", "400/2", "200.0ms/100.0ms"}},
		{name: "canary", args: []string{"canary", "-judge", "router", "v3", "0.1"}, key: "admin", want: []string{"router v3: judging at weight 0.1"}},
		{name: "canary held", args: []string{"canary", "decode", "v3", "0.5"}, key: "admin", want: []string{"holding at weight 0.5"}},
		{name: "canary bad weight", args: []string{"canary", "decode", "v3", "2"}, key: "admin", code: 2, wantErr: "want a number in [0, 1]"},
		{name: "canary missing version", args: []string{"canary", "decode", "0.5"}, key: "admin", code: 2, wantErr: "usage: canary"},
		{name: "promote", args: []string{"promote", "-reason", "looks good", "decode"}, key: "admin", want: []string{"decode v2: promoted at weight 1 (looks good)"}},
		{name: "abort", args: []string{"abort", "decode"}, key: "admin", want: []string{"aborted at weight 0"}},
		{name: "abort unknown role", args: []string{"abort", "prefill"}, key: "admin", code: 1, wantErr: "no active rollout"},
		{name: "unknown command", args: []string{"scale"}, code: 2, wantErr: "unknown command"},
		{name: "no command", args: nil, code: 2, wantErr: "usage:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			env := func(k string) string {
				switch k {
				case "SWITCHYARD_URL":
					return srv.URL
				case "SWITCHYARD_API_KEY":
					return tc.key
				}
				return ""
			}
			code := Run(t.Context(), Env{Args: tc.args, Stdout: &out, Stderr: &errOut, Getenv: env})
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if tc.notWant != "" && strings.Contains(out.String(), tc.notWant) {
				t.Errorf("stdout has %q:\n%s", tc.notWant, out.String())
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantErr, errOut.String())
			}
		})
	}
}

func TestURLFlagWins(t *testing.T) {
	t.Parallel()
	srv := fakeConsole(t)
	var out, errOut bytes.Buffer
	env := func(k string) string {
		if k == "SWITCHYARD_URL" {
			return "http://127.0.0.1:1"
		}
		return ""
	}
	code := Run(t.Context(), Env{Args: []string{"-url", srv.URL + "/", "-key", "k", "instances"}, Stdout: &out, Stderr: &errOut, Getenv: env})
	if code != 0 || !strings.Contains(out.String(), "decode-0") {
		t.Errorf("exit %d: %s %s", code, out.String(), errOut.String())
	}
}
