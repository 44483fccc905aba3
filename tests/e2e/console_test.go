package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/filedisc"
)

// chromium is headless Chromium's path from $CHROMIUM_BIN (scripts/test.sh
// sets it). Unset, the test is skipped, unless SWITCHYARD_REQUIRE_SHARED=1
// says every dependency must be there.
func chromium(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("CHROMIUM_BIN")
	switch {
	case bin == "" && os.Getenv("SWITCHYARD_REQUIRE_SHARED") == "1":
		t.Fatal("CHROMIUM_BIN unset with SWITCHYARD_REQUIRE_SHARED=1: run scripts/deps.sh (it installs chromium)")
	case bin == "":
		t.Skip("CHROMIUM_BIN unset: no browser to drive")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("CHROMIUM_BIN=%q: %v", bin, err)
	}
	return bin
}

// artifacts is where a test saves files worth looking at afterwards:
// $SWITCHYARD_ARTIFACTS/<test name> when set, else the test's temporary
// directory (logged, and removed with the test).
func artifacts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if root := os.Getenv("SWITCHYARD_ARTIFACTS"); root != "" {
		dir = filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("artifacts in %s", dir)
	return dir
}

// The console, opened in a real browser against a running mesh, lists
// exactly the instances discovery lists, and its numbers move under load.
func TestConsoleInBrowser(t *testing.T) {
	bin := chromium(t)
	m := StartMesh(t, 2, "kv", "-executor", "sim")
	out := artifacts(t)
	model := waitModel(t, client(m))
	reg, err := filedisc.New(filedisc.Config{Dir: m.Dir})
	if err != nil {
		t.Fatal(err)
	}

	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	page := "http://" + m.Frontend.Addr + "/console/"
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(`#instances tbody tr`)); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}

	// The rows are discovery's instances, no more and no fewer.
	var shown []string
	deptest.Eventually(t, 30*time.Second, "the console lists discovery's instances", func() bool {
		want := listed(t, reg)
		var err error
		shown, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('#instances tbody tr')].map(r => r.dataset.id).sort()`))
		if err != nil {
			t.Fatal(err)
		}
		return slices.Equal(shown, want)
	})
	for _, id := range []string{"decode-0", "decode-1", "router-0", "frontend-0"} {
		if !slices.Contains(shown, id) {
			t.Errorf("console shows %v, missing %s", shown, id)
		}
	}
	screenshot(t, ctx, filepath.Join(out, "console-idle.png"))

	// Under load a worker's running count and the latency figures move.
	lctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { load(lctx, m, model, i) })
	}
	var running int
	var ttft string
	deptest.Eventually(t, 60*time.Second, "running requests and a TTFT shown", func() bool {
		var err error
		running, err = chromedp.Run(ctx, chromedp.Evaluate[int](
			`[...document.querySelectorAll('#instances td.running')].reduce((s, td) => s + (+td.textContent || 0), 0)`))
		if err != nil {
			t.Fatal(err)
		}
		if ttft, err = chromedp.Run(ctx, chromedp.Text(`#ttft_p50`)); err != nil {
			t.Fatal(err)
		}
		return running > 0 && ttft != "–"
	})
	// The routers' decisions, read from their metrics: a rate, and the
	// workers they chose with the overlap they were chosen for.
	var routing string
	deptest.Eventually(t, 60*time.Second, "the routers' decisions shown", func() bool {
		var err error
		if routing, err = chromedp.Run(ctx, chromedp.Text(`#routing`)); err != nil {
			t.Fatal(err)
		}
		routed, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
			`[...document.querySelectorAll('#instances td.routed')].some(td => +td.textContent > 0)`))
		if err != nil {
			t.Fatal(err)
		}
		rate, _, _ := strings.Cut(routing, " decisions/s")
		v, err := strconv.ParseFloat(rate, 64)
		return err == nil && v > 0 && routed
	})
	// The workers' TTFT phases.
	var phases string
	deptest.Eventually(t, 60*time.Second, "the TTFT breakdown shown", func() bool {
		var err error
		if phases, err = chromedp.Run(ctx, chromedp.Text(`#phases`)); err != nil {
			t.Fatal(err)
		}
		return strings.HasPrefix(phases, "queue ") && strings.Contains(phases, "prefill")
	})
	// A sampled request's timeline: routed, then its first token.
	deptest.Eventually(t, 60*time.Second, "a sampled request's timeline shown", func() bool {
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("traces").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(text, "routed: router ") && strings.Contains(text, "first token")
	})
	screenshot(t, ctx, filepath.Join(out, "console-load.png"))
	stop()
	wg.Wait()
	t.Logf("under load: %d running, TTFT p50 %s, routing %q, on the workers %q", running, ttft, routing, phases)
}

// listed is every instance ID discovery lists, sorted.
func listed(t *testing.T, reg discovery.Registry) []string {
	t.Helper()
	var ids []string
	for _, role := range []string{discovery.RoleFrontend, discovery.RoleRouter, discovery.RolePrefill, discovery.RoleDecode,
		discovery.RoleKVBMController, discovery.RolePlanner} {
		ins, err := reg.Instances(t.Context(), role)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range ins {
			ids = append(ids, in.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// load sends completions one after another until ctx ends.
func load(ctx context.Context, m *Mesh, model string, i int) {
	body := fmt.Sprintf(`{"model":%q,"prompt":"Once upon a time %d","max_tokens":128}`, model, i)
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL()+"completions", strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// An admin drains a worker from the console: the frontend asks the
// supervisor, the worker leaves the pool, and the console stops listing
// it. Without the admin key the drain is refused.
func TestConsoleDrainsThroughSupervisor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	keys := filepath.Join(t.TempDir(), "admin-keys")
	if err := os.WriteFile(keys, []byte("sk-admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSupervisedWith(t, []string{"-admin-keys-file", keys, "-console-interval", "200ms"}, "-executor", "sim")
	api := "http://" + s.mesh.Frontend.Addr + "/console/api/"
	decodes := func() []string {
		var snap struct {
			Instances []struct{ ID, Role, Health string }
		}
		if code := getJSON(t, api+"snapshot", "sk-admin", &snap); code != http.StatusOK {
			t.Fatalf("snapshot: %d", code)
		}
		var ids []string
		for _, in := range snap.Instances {
			if in.Role == discovery.RoleDecode && in.Health == "passing" {
				ids = append(ids, in.ID)
			}
		}
		return ids
	}
	deptest.Eventually(t, 60*time.Second, "both decode workers shown", func() bool {
		return slices.Equal(decodes(), []string{"decode-0", "decode-1"})
	})
	if code := postJSON(t, api+"drain", "", `{"id":"decode-1"}`, nil); code != http.StatusUnauthorized {
		t.Errorf("drain without a key: %d, want 401", code)
	}
	var drained struct{ ID, Pool string }
	if code := postJSON(t, api+"drain", "sk-admin", `{"id":"decode-1"}`, &drained); code != http.StatusOK ||
		drained.ID != "decode-1" || drained.Pool != "decode" {
		t.Fatalf("drain: %d %+v", code, drained)
	}
	deptest.Eventually(t, 60*time.Second, "decode-1 gone from the pool and the console", func() bool {
		return len(s.decode(t)) == 1 && slices.Equal(decodes(), []string{"decode-0"})
	})
}

func getJSON(t *testing.T, url, key string, out any) int {
	t.Helper()
	return callJSON(t, http.MethodGet, url, key, "", out)
}

func postJSON(t *testing.T, url, key, body string, out any) int {
	t.Helper()
	return callJSON(t, http.MethodPost, url, key, body, out)
}

func callJSON(t *testing.T, method, url, key, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// TestConsoleCordonsAWorker: an admin cordons a worker through the
// console; it stays up and listed (marked cordoned) but gets no new
// requests; uncordoned, it serves again. A key without the admin role is
// refused.
func TestConsoleCordonsAWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	bin, dir := Build(t), t.TempDir()
	common := []string{"-discovery", "file", "-discovery-dir", dir, "-drain-timeout", "2s"}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t)) }
	var workers []*Proc
	for i := range 2 {
		workers = append(workers, Start(t, bin, "decode", addr(), append([]string{"-id", fmt.Sprint("decode-", i), "-executor", "sim", "-sim-vocab", "512"}, common...)...))
	}
	Start(t, bin, "router", addr(), append([]string{"-id", "router-0", "-mode", "round-robin"}, common...)...)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("sk-admin admin\nsk-user\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fe := Start(t, bin, "frontend", addr(), append([]string{"-id", "frontend-0", "-api-keys-file", keys}, common...)...)
	base := "http://" + fe.Addr
	c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("sk-user"), option.WithMaxRetries(0))
	model := waitModel(t, c)
	waitServing(t, c, model)
	served := func() float64 {
		return promSum(t, "http://"+workers[0].Addr+"/metrics", "switchyard_worker_prefill_requests_total", "")
	}
	batch := func() float64 {
		before := served()
		for i := range 20 {
			if _, err := c.Completions.New(t.Context(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(model),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(fmt.Sprint("cordon test ", i))}, MaxTokens: openai.Int(2)}); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		}
		return served() - before
	}
	cordon := func(key string, on bool) int {
		return postJSON(t, base+"/console/api/cordon", key, fmt.Sprintf(`{"id":"decode-0","cordoned":%v}`, on), nil)
	}
	if code := cordon("sk-user", true); code != http.StatusForbidden {
		t.Fatalf("cordon with a user key: %d, want 403", code)
	}
	if code := cordon("sk-admin", true); code != http.StatusOK {
		t.Fatalf("cordon: %d", code)
	}
	deptest.Eventually(t, 30*time.Second, "a cordoned worker to get no requests", func() bool { return batch() == 0 })
	var snap struct {
		Instances []struct {
			ID       string
			Cordoned bool
		}
	}
	deptest.Eventually(t, 30*time.Second, "the console to show decode-0 cordoned", func() bool {
		getJSON(t, base+"/console/api/snapshot", "sk-user", &snap)
		for _, in := range snap.Instances {
			if in.ID == "decode-0" {
				return in.Cordoned
			}
		}
		return false
	})
	if res, err := http.Get("http://" + workers[0].Addr + "/health"); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the cordoned worker is not up: %v %v", res, err)
	}
	if code := cordon("sk-admin", false); code != http.StatusOK {
		t.Fatalf("uncordon: %d", code)
	}
	deptest.Eventually(t, 30*time.Second, "an uncordoned worker to serve again", func() bool { return batch() > 0 })
	if code := postJSON(t, base+"/console/api/cordon", "sk-admin", `{"id":"nope","cordoned":true}`, nil); code != http.StatusNotFound {
		t.Errorf("cordon of an unknown worker: %d, want 404", code)
	}
}
