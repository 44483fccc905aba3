package disagg

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/nixl/metadata"
)

// The exporter vets each target with CheckTarget before it loads the
// target's metadata: it sees the decode agent's own identity (name and
// endpoint digest), and a refusal makes the decode worker prefill locally
// with the same output, while an approval lets the remote path run.
func TestCheckTarget(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{true, false} {
		t.Run(map[bool]string{true: "allowed", false: "refused"}[allow], func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var seen []string
			s := newStack(t, stackOpts{backend: tcpBackend, threshold: 8, check: func(_ context.Context, md *metadata.Agent) error {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, md.Name+" "+md.Endpoints())
				if !allow {
					return errors.New("not a decode instance in discovery")
				}
				return nil
			}})
			blob, err := s.decAgent.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			own, err := metadata.Decode(blob)
			if err != nil {
				t.Fatal(err)
			}
			r := engine.Request{Prompt: prompts(1, 200, 11)[0], Stop: engine.StopParams{MaxTokens: 6, IgnoreEOS: true}}
			for len(r.Prompt) < 64 {
				r.Prompt = append(r.Prompt, r.Prompt...)
			}
			want := collect(t, s.ref, r, prep{})
			if got := s.generate(t, r); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 || seen[0] != own.Name+" "+own.Endpoints() {
				t.Errorf("checked %q, want the decode agent %q once", seen, own.Name+" "+own.Endpoints())
			}
			path := map[bool]string{true: PathRemote, false: PathFallback}[allow]
			if s.obs.count(path) != 1 {
				t.Errorf("paths %v, want one %s", s.obs.paths, path)
			}
			waitIdle(t, "decode", s.dec)
			waitIdle(t, "prefill", s.pre)
		})
	}
}
