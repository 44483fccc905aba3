package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine/gguf"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/worker"
)

// storiesGGUF converts stories260K for llama-server and returns the GGUF,
// the checkpoint and the tokenizer.
func storiesGGUF(t *testing.T) (ggufPath, ckpt, tok string) {
	t.Helper()
	dir := storiesDir(t)
	ckpt, tok = filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin")
	ggufPath = filepath.Join(t.TempDir(), "stories260K.gguf")
	if err := gguf.ConvertFiles(ggufPath, ckpt, tok, "stories260K"); err != nil {
		t.Fatal(err)
	}
	return ggufPath, ckpt, tok
}

// A worker that starts its own llama-server serves the same greedy tokens
// as a built-in worker, publishes KV events the router can hash-match, and
// stops its llama-server when it stops.
func TestLlamaCppWorkerStartsItsEngine(t *testing.T) {
	t.Parallel()
	bin := deptest.Binary(t, "llama-server", "LLAMA_SERVER_BIN")
	model, ckpt, tokPath := storiesGGUF(t)
	lc := start(t, "decode", "-engine", "llamacpp", "-llama-server-bin", bin, "-model", model, "-tokenizer", tokPath,
		"-engine-slots", "2", "-engine-args", "--threads 1")
	bi := start(t, "decode", "-model", ckpt, "-tokenizer", tokPath)

	info, err := lc.client.GetModelInfo(t.Context(), connect.NewRequest(&workerv1.GetModelInfoRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if m := info.Msg; m.GetModel() != "stories260K" || m.GetContextLength() != 512 || m.GetBlockSize() != 16 || m.GetTokenizerKind() != worker.TokenizerLlama2c || m.GetVocabSize() != 512 {
		t.Fatalf("model info %v", m)
	}
	tok, err := tokenizer.LoadBPEFile(tokPath, 512)
	if err != nil {
		t.Fatal(err)
	}
	prompt := tok.Encode("Once upon a time, there was a little girl named Lily.", true, false)
	want, err := collect(t, bi.client, req("stories260K", prompt, 48))
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, lc.client, req("stories260K", prompt, 48))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.tokens, want.tokens) || got.text != want.text || got.last.GetUsage().GetCompletionTokens() != 48 {
		t.Fatalf("llama.cpp worker: %q (%v)\nbuilt-in worker: %q", got.text, got.last.GetUsage(), want.text)
	}

	st, err := lc.client.SubscribeKvEvents(t.Context(), connect.NewRequest(&workerv1.SubscribeKvEventsRequest{Dump: true}))
	if err != nil {
		t.Fatal(err)
	}
	dumped := map[uint64]bool{}
	for st.Receive() {
		for _, e := range st.Msg().GetEvents() {
			for _, h := range e.GetStored().GetBlockHashes() {
				dumped[h] = true
			}
		}
		if st.Msg().GetDumpComplete() {
			break
		}
	}
	st.Close()
	for i, h := range kvhash.BlockHashes(prompt, 16, 0) {
		if !dumped[h] {
			t.Fatalf("the dump lacks prompt block %d (%x): the router would not find it", i, h)
		}
	}

	pid := enginePid(t, lc.Log())
	if code := lc.Stop(t); code != 0 {
		t.Fatalf("worker exited %d", code)
	}
	deptest.Eventually(t, 20*time.Second, "the worker's llama-server to exit", func() bool { return syscall.Kill(pid, 0) != nil })
}

var pidRE = regexp.MustCompile(`engine process started.* pid=(\d+)`)

func enginePid(t *testing.T, log string) int {
	t.Helper()
	m := pidRE.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no engine pid in the log:\n%s", log)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// A worker driving a running llama-server serves it under the server's
// own name when -model-name is not set. With -engine-kv-events=none it
// publishes no KV events and says so (Unimplemented), which is the
// router's cue to approximate.
func TestLlamaCppWorkerWithoutEvents(t *testing.T) {
	t.Parallel()
	model, _, tokPath := storiesGGUF(t)
	srv := deptest.StartLlamaServer(t, model, "--parallel", "1", "--cache-ram", "0", "--alias", "stories260K")
	w := start(t, "decode", "-engine", "llamacpp", "-engine-url", srv.URL, "-tokenizer", tokPath, "-engine-kv-events", "none")
	info, err := w.client.GetModelInfo(t.Context(), connect.NewRequest(&workerv1.GetModelInfoRequest{}))
	if err != nil || info.Msg.GetModel() != "stories260K" {
		t.Fatalf("model info %v, %v; want the server's alias", info, err)
	}
	st, err := w.client.SubscribeKvEvents(t.Context(), connect.NewRequest(&workerv1.SubscribeKvEventsRequest{Dump: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for st.Receive() {
		t.Fatalf("got events %v", st.Msg())
	}
	if code := connect.CodeOf(st.Err()); code != connect.CodeUnimplemented {
		t.Fatalf("SubscribeKvEvents: %v; want Unimplemented", st.Err())
	}
}

// Bad engine settings stop the worker before it registers, with one error
// naming the setting.
func TestEngineSetupRefuses(t *testing.T) {
	t.Parallel()
	model, _, tokPath := storiesGGUF(t)
	silent := fmt.Sprintf("http://127.0.0.1:%d", deptest.FreePort(t))
	srv := deptest.StartLlamaServer(t, model, "--parallel", "1", "--cache-ram", "0", "--alias", "other-model")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a URL that does not answer", []string{"-engine-url", silent, "-model-name", "stories260K", "-engine-start-timeout", "300ms"},
			`-engine-url="` + silent + `": no answer within -engine-start-timeout=300ms`},
		{"an engine serving another model", []string{"-engine-url", srv.URL, "-model-name", "stories260K"},
			`-engine-url="` + srv.URL + `": llama-server at ` + srv.URL + ` serves ["other-model"], not model "stories260K"`},
		{"blocks that do not fit its slots", []string{"-engine-url", srv.URL, "-model-name", "other-model", "-block-size", "512"},
			"under two 512-token blocks"},
	} {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		code := service.Run(ctx, worker.Spec("decode", "v0", "127.0.0.1:0"), service.Env{
			Args:   append([]string{"-listen", "127.0.0.1:0", "-discovery", "none", "-engine", "llamacpp", "-tokenizer", tokPath}, tc.args...),
			Stdout: &out, Stderr: &out,
		})
		cancel()
		if code != service.ExitError || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: exit %d, output:\n%s\nwant exit %d and %q", tc.name, code, out.String(), service.ExitError, tc.want)
		}
	}
}
