package route

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/libs/radix"
)

// TestDecisionDebugLog: at debug level every decision is logged with each
// candidate's depth, load and cost (what one reads when the hit ratio is
// low), the generation it placed and the client request it belongs to;
// at info level nothing is.
func TestDecisionDebugLog(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var buf bytes.Buffer
		ix := radix.New()
		r := newRouter(t, func(c *Config) {
			c.Index = ix
			c.Logger = slog.New(reqid.LogHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})))
		})
		r.SetWorkers(instances(discovery.RoleDecode, "m", "w1", "w2"), nil)
		prompt := tokens(32, 1)
		cache(t, ix, "w2", prompt, kvtier.Device)
		ctx := reqid.With(t.Context(), "client-1")
		if _, err := r.Decide(ctx, &routerv1.RouteRequest{Model: "m", TokenIds: prompt, RequestId: "req-1"}); err != nil {
			t.Fatal(err)
		}
		got := buf.String()
		if level == slog.LevelInfo {
			if got != "" {
				t.Errorf("info level logged %q", got)
			}
			continue
		}
		for _, want := range []string{"msg=route", "generation_id=req-1", "request_id=client-1", "chosen=w2", "w2:depth=8,", "w1:depth=0,"} {
			if !strings.Contains(got, want) {
				t.Errorf("debug log %q lacks %q", got, want)
			}
		}
	}
}

// The decision log names the decode pick and its candidates even when a
// prefill worker is picked too (both picks share the pooled candidates).
func TestDecisionDebugLogDisaggregated(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	ix := radix.New()
	r := newRouter(t, func(c *Config) {
		c.Index = ix
		c.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	r.SetWorkers(instances(discovery.RoleDecode, "m", "w1"), instances(discovery.RolePrefill, "m", "p1", "p2"))
	prompt := tokens(1024, 1)
	cache(t, ix, "p2", prompt, kvtier.Host)
	res, err := r.Decide(t.Context(), &routerv1.RouteRequest{Model: "m", TokenIds: prompt, RequestId: "req-1"})
	if err != nil || res.GetPrefill().GetInstanceId() != "p2" {
		t.Fatalf("decided %v, %v; want a prefill worker", res, err)
	}
	got := buf.String()
	for _, want := range []string{"chosen=w1", "w1:depth=0,"} {
		if !strings.Contains(got, want) {
			t.Errorf("debug log %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "p1:") || strings.Contains(got, "p2:") {
		t.Errorf("debug log %q lists prefill candidates as decode ones", got)
	}
}
