package e2e

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/gen/switchyard/planner/v1/plannerv1connect"
	"switchyard.dev/libs/mesh/deptest"
)

// previousRelease is svc's previous release: the last commit before HEAD
// that changed its VERSION, and that version. The current code is HEAD's
// (plus whatever is not committed yet), so a release made by HEAD itself
// is the current one, not the previous.
func previousRelease(t *testing.T, svc string) (commit, version string) {
	t.Helper()
	path := "services/" + svc + "/VERSION"
	out, err := exec.Command("git", "-C", "../..", "log", "--format=%H", "HEAD~1", "--", path).Output()
	if err != nil {
		t.Skipf("no git history here (%v): the compatibility matrix needs the repository's history", err)
	}
	commits := strings.Fields(string(out))
	if len(commits) == 0 {
		t.Skipf("%s has no release before HEAD", svc)
	}
	v, err := exec.Command("git", "-C", "../..", "show", commits[0]+":"+path).Output()
	if err != nil {
		t.Fatalf("git show %s:%s: %v", commits[0], path, err)
	}
	return commits[0], strings.TrimSpace(string(v))
}

// buildRelease builds svc as of commit, in a worktree of its own, into a
// directory beside the test's other binaries.
func buildRelease(t *testing.T, svc, commit, version string) string {
	t.Helper()
	tree, bin := filepath.Join(t.TempDir(), "src"), t.TempDir()
	git := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("git", append([]string{"-C", "../.."}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("worktree", "add", "--detach", tree, commit)
	t.Cleanup(func() { git("worktree", "remove", "--force", tree) })
	// Releases before the services' root packages stamped main.version;
	// -X of a symbol a build lacks is ignored, so both can be set.
	ldflags := "-X main.version=" + version + " -X switchyard.dev/services/" + svc + ".Version=" + version
	cmd := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin+"/",
		"switchyard.dev/services/"+svc+"/cmd/"+svc)
	cmd.Dir = tree
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s %s (%s): %v\n%s", svc, version, commit[:12], err, out)
	}
	return bin
}

// TestPreviousReleases is the mixed-version matrix: for each service in
// turn, its previous release (built from git) runs in a mesh of every
// other service at the current code, on stories260K with disaggregated
// prefill, and the mesh must serve as an all-current one does: the
// greedy completion exact, streaming and not; a long prompt prefilled on
// the prefill worker with the KV moved to the decode worker; the
// planner's plan and the console's snapshot readable.
func TestPreviousReleases(t *testing.T) {
	if testing.Short() {
		t.Skip("builds previous releases and runs real processes; skipped under -short")
	}
	model, tok := StoriesModel(t)
	cur := Build(t)
	for _, svc := range Services {
		t.Run(svc, func(t *testing.T) {
			commit, version := previousRelease(t, svc)
			old := buildRelease(t, svc, commit, version)
			t.Logf("%s %s from %s", svc, version, commit[:12])
			bins := map[string]string{}
			for _, s := range Services {
				bins[s] = cur
			}
			bins[svc] = old
			checkMixedMesh(t, bins, model, tok, svc, version)
		})
	}
}

func checkMixedMesh(t *testing.T, bins map[string]string, model, tok, oldSvc, oldVersion string) {
	t.Helper()
	dir := t.TempDir()
	common := []string{"-discovery", "file", "-discovery-dir", dir, "-drain-timeout", "2s"}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t)) }
	worker := []string{"-executor", "llama", "-model", model, "-tokenizer", tok, "-disagg-threshold-tokens", "32"}
	procs := map[string]*Proc{}
	start := func(svc string, args ...string) {
		procs[svc] = Start(t, bins[svc], svc, addr(), append(append([]string{"-id", svc + "-0"}, common...), args...)...)
	}
	start("decode", worker...)
	start("prefill", worker...)
	start("kvbm-controller")
	start("router", "-disagg-threshold-tokens", "32")
	start("planner", "-interval", "500ms")
	start("frontend")
	base := "http://" + procs["frontend"].Addr
	c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	id := waitModel(t, c)
	waitServing(t, c, id)

	comp, err := c.Completions.New(t.Context(), openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel(id),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}, MaxTokens: openai.Int(24), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatalf("completion with %s %s: %v", oldSvc, oldVersion, err)
	}
	if !strings.HasPrefix(comp.Choices[0].Text, ", there was a little girl named Lily.") {
		t.Errorf("greedy completion with %s %s: %q", oldSvc, oldVersion, comp.Choices[0].Text)
	}
	stream := c.Completions.NewStreaming(t.Context(), openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel(id),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}, MaxTokens: openai.Int(24), Temperature: openai.Float(0),
	})
	var streamed strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			streamed.WriteString(ch.Text)
		}
	}
	if err := stream.Err(); err != nil || streamed.String() != comp.Choices[0].Text {
		t.Errorf("streamed with %s %s: %q, %v; want %q", oldSvc, oldVersion, streamed.String(), err, comp.Choices[0].Text)
	}

	// A prompt past the disaggregation threshold: prefilled remotely, the
	// KV moved from the prefill worker to the decode worker.
	long := strings.Repeat("Once upon a time there was a little dog. ", 8)
	before := promSum(t, "http://"+procs["decode"].Addr+"/metrics", "switchyard_worker_prefill_requests_total", `path="remote"`)
	if _, err := c.Completions.New(t.Context(), openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModel(id),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(long)}, MaxTokens: openai.Int(8), Temperature: openai.Float(0),
	}); err != nil {
		t.Fatalf("long prompt with %s %s: %v", oldSvc, oldVersion, err)
	}
	if after := promSum(t, "http://"+procs["decode"].Addr+"/metrics", "switchyard_worker_prefill_requests_total", `path="remote"`); after != before+1 {
		t.Errorf("with %s %s the long prompt was not prefilled remotely (remote prefills %v → %v)", oldSvc, oldVersion, before, after)
	}

	// The console (a feature of the current frontend) reads the planner
	// and every worker; an old frontend may predate it, and then the
	// planner is asked directly.
	if oldSvc == "frontend" {
		plan := plannerv1connect.NewPlannerServiceClient(http.DefaultClient, "http://"+procs["planner"].Addr)
		if _, err := plan.GetPlan(t.Context(), connect.NewRequest(&plannerv1.GetPlanRequest{})); err != nil {
			t.Errorf("GetPlan beside frontend %s: %v", oldVersion, err)
		}
		return
	}
	var snap struct {
		Instances []struct{ ID, Version, Health string }
		Plan      *struct{ Reason string }
	}
	deptest.Eventually(t, 30*time.Second, "the console to show the planner's plan", func() bool {
		return getJSON(t, base+"/console/api/snapshot", "", &snap) == http.StatusOK && snap.Plan != nil && snap.Plan.Reason != ""
	})
	found := false
	for _, in := range snap.Instances {
		if in.ID == oldSvc+"-0" {
			found = in.Version == oldVersion
		}
	}
	if !found {
		t.Errorf("the console does not list %s-0 at version %s: %+v", oldSvc, oldVersion, snap.Instances)
	}
}
