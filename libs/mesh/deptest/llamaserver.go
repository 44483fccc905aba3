package deptest

import (
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// LlamaServer is a running llama.cpp llama-server: a real third-party
// engine, serving one GGUF model on the CPU.
type LlamaServer struct {
	*Process
	// URL is the server's base URL, e.g. http://127.0.0.1:8080.
	URL string
}

// StartLlamaServer starts llama-server on a free loopback port serving the
// GGUF model at model, with its metrics and slots endpoints on and the
// extra arguments given (e.g. "--parallel", "2"). The binary comes from
// $LLAMA_SERVER_BIN or PATH (`make test` builds it, scripts/llamacpp.sh).
// It returns once /health answers 200, that is once the model is loaded.
func StartLlamaServer(t testing.TB, model string, extra ...string) *LlamaServer {
	t.Helper()
	bin := Binary(t, "llama-server", "LLAMA_SERVER_BIN")
	s := &LlamaServer{}
	args := func() []string {
		port := strconv.Itoa(FreePort(t))
		s.URL = "http://127.0.0.1:" + port
		return append([]string{"--model", model, "--host", "127.0.0.1", "--port", port,
			"--metrics", "--slots", "--threads", "1", "--no-webui"}, extra...)
	}
	client := &http.Client{Timeout: time.Second}
	s.Process = startRetrying(t, bin, filepath.Join(t.TempDir(), "llama-server.log"), args, func(*Process) bool {
		resp, err := client.Get(s.URL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}
