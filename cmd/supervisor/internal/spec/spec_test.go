package spec

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`{"logs":"/tmp/l","pools":[
		{"name":"consul","command":["consul","agent"],"wait":true,"ready":{"http":"http://127.0.0.1:8500/v1/status/leader","contains":":"}},
		{"name":"decode","command":["bin/decode","-id","{id}","-listen","127.0.0.1:{port}"],"count":2,"port":9200,"scalable":true,"max":8,
		 "ready":{"http":"http://127.0.0.1:{port}/health","timeout":"5s"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(s.StopTimeout); got != 30*time.Second {
		t.Errorf("stop timeout %v, want the 30s default", got)
	}
	c, d := s.Pools[0], s.Pools[1]
	if *c.Count != 1 || c.Min != 1 || c.Max != 1 || c.ID != "consul-{i}" || time.Duration(c.Ready.Timeout) != time.Minute {
		t.Errorf("consul pool defaults: %+v", c)
	}
	if *d.Count != 2 || d.Min != 0 || d.Max != 8 {
		t.Errorf("decode pool: %+v", d)
	}
	in := d.Instance(3)
	if in.ID != "decode-3" || in.Port != 9203 {
		t.Errorf("instance 3: %+v", in)
	}
	if got := strings.Join(in.ExpandAll(d.Command), " "); got != "bin/decode -id decode-3 -listen 127.0.0.1:9203" {
		t.Errorf("command %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	pool := func(extra string) string {
		return `{"logs":"/l","pools":[{"name":"decode","command":["d"]` + extra + `}]}`
	}
	for _, tc := range []struct{ name, spec, want string }{
		{"not JSON", `{`, "unexpected EOF"},
		{"unknown field", `{"logs":"/l","pools":[],"frobnicate":1}`, `unknown field "frobnicate"`},
		{"trailing data", pool("") + `{}`, "data after"},
		{"a stray brace after", pool("") + `}`, "data after"},
		{"no logs", `{"pools":[{"name":"a","command":["a"]}]}`, "logs"},
		{"no pools", `{"logs":"/l","pools":[]}`, "pools: none"},
		{"bad name", `{"logs":"/l","pools":[{"name":"Decode","command":["d"]}]}`, "name"},
		{"no command", `{"logs":"/l","pools":[{"name":"a","command":[]}]}`, "command"},
		{"bad service", pool(`,"service":"Decode"`), "service"},
		{"negative count", pool(`,"count":-1`), "negative"},
		{"min on a fixed pool", pool(`,"min":2`), "scalable"},
		{"max too high", pool(`,"scalable":true,"max":100000`), "max"},
		{"count above max", pool(`,"scalable":true,"count":5,"max":2`), "outside"},
		{"ids collide", pool(`,"scalable":true,"max":2,"id":"decode"`), "{i}"},
		{"ports overflow", pool(`,"port":65535,"scalable":true,"max":2`), "port"},
		{"unknown placeholder", `{"logs":"/l","pools":[{"name":"a","command":["a","{model}"]}]}`, "{model}"},
		{"two checks", pool(`,"ready":{"http":"http://x","exec":["true"]}`), "one of"},
		{"no check", pool(`,"ready":{}`), "one of"},
		{"contains without http", pool(`,"ready":{"exec":["true"],"contains":"x"}`), "contains"},
		{"bad duration", `{"logs":"/l","stop_timeout":"soon","pools":[{"name":"a","command":["a"]}]}`, "soon"},
		{"negative duration", `{"logs":"/l","stop_timeout":"-1s","pools":[{"name":"a","command":["a"]}]}`, "negative"},
		{"bad env", pool(`,"env":["=x"]`), "NAME=value"},
		{"same name", `{"logs":"/l","pools":[{"name":"a","command":["a"]},{"name":"a","command":["a"]}]}`, "twice"},
		{"same port", `{"logs":"/l","pools":[{"name":"a","command":["a"],"port":9000},{"name":"b","command":["b"],"port":9000}]}`, "port 9000"},
	} {
		if _, err := Parse([]byte(tc.spec)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// FuzzParse: any input is refused or parses into a spec that survives a
// round trip through JSON unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"logs":"/l","pools":[{"name":"a","command":["a","{id}"],"port":9000,"scalable":true,"max":3,"ready":{"exec":["true"]}}]}`))
	f.Add([]byte(`{"logs":"/l","stop_timeout":"1s","pools":[{"name":"b","command":["b"],"count":0}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		out2, _ := json.Marshal(s2)
		if string(out) != string(out2) {
			t.Fatalf("round trip changed the spec:\n%s\n%s", out, out2)
		}
	})
}
