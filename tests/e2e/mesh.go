package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"switchyard.dev/libs/sharedtest"

	"switchyard.dev/libs/mesh/deptest"
)

// Mesh is a local stack of real processes sharing file discovery.
type Mesh struct {
	Bin      string
	Dir      string // discovery directory
	Workers  []*Proc
	Router   *Proc
	Frontend *Proc
	Model    string
}

// StoriesModel returns the stories260K checkpoint and tokenizer paths, or
// ends the test as libs/sharedtest decides when ../shared is absent.
func StoriesModel(t testing.TB) (model, tok string) {
	t.Helper()
	dir := sharedtest.Path(t, sharedtest.Stories260K)
	return filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin")
}

// StartMesh starts decode workers, one router and a frontend. workerArgs
// select the executor and model.
func StartMesh(t testing.TB, decode int, routerMode string, workerArgs ...string) *Mesh {
	t.Helper()
	m := &Mesh{Bin: Build(t), Dir: t.TempDir()}
	common := []string{"-discovery", "file", "-discovery-dir", m.Dir, "-drain-timeout", "2s"}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t)) }
	for i := range decode {
		args := append([]string{"-id", fmt.Sprintf("decode-%d", i)}, common...)
		m.Workers = append(m.Workers, Start(t, m.Bin, "decode", addr(), append(args, workerArgs...)...))
	}
	m.Router = Start(t, m.Bin, "router", addr(), append([]string{"-id", "router-0", "-mode", routerMode}, common...)...)
	m.Frontend = Start(t, m.Bin, "frontend", addr(), append([]string{"-id", "frontend-0"}, common...)...)
	return m
}

// URL is the frontend's OpenAI base URL.
func (m *Mesh) URL() string { return "http://" + m.Frontend.Addr + "/v1/" }
