package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"switchyard.dev/libs/mesh/testenv"
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
// empty strings when ../shared is absent.
func StoriesModel() (model, tok string) {
	dir, _ := filepath.Abs("../../../shared/models/stories260K")
	model, tok = filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin")
	if _, err := os.Stat(model); err != nil {
		return "", ""
	}
	return model, tok
}

// StartMesh starts decode workers, one router and a frontend. workerArgs
// select the executor and model.
func StartMesh(t testing.TB, decode int, routerMode string, workerArgs ...string) *Mesh {
	t.Helper()
	m := &Mesh{Bin: Build(t), Dir: t.TempDir()}
	common := []string{"-discovery", "file", "-discovery-dir", m.Dir, "-drain-timeout", "2s"}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)) }
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
