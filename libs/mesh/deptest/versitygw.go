package deptest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// VersityGW is a running versitygw: a real S3 server (SigV4, conditional
// PUT, range GET) over a directory, the object store of tests.
type VersityGW struct {
	*Process
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:9000.
	Endpoint string
	// AccessKey and SecretKey are the root credentials.
	AccessKey, SecretKey string
	// Dir is the directory the server keeps its buckets in: a bucket is
	// Dir/<bucket>, an object a file below it.
	Dir string
}

// StartVersityGW starts versitygw on a free loopback port over a fresh
// directory. The binary comes from $VERSITYGW_BIN or PATH (`make test`
// builds it from tools/versitygw).
func StartVersityGW(t testing.TB) *VersityGW {
	t.Helper()
	bin := Binary(t, "versitygw", "VERSITYGW_BIN")
	dir := t.TempDir()
	g := &VersityGW{AccessKey: "switchyard-test", SecretKey: "switchyard-test-secret", Dir: filepath.Join(dir, "s3")}
	if err := os.MkdirAll(g.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var addr string
	args := func() []string {
		addr = "127.0.0.1:" + strconv.Itoa(FreePort(t))
		g.Endpoint = "http://" + addr
		return []string{"--port", addr, "--quiet", "posix", g.Dir}
	}
	g.Process = startEnv(t, bin, filepath.Join(dir, "versitygw.log"), args,
		[]string{"ROOT_ACCESS_KEY=" + g.AccessKey, "ROOT_SECRET_KEY=" + g.SecretKey},
		func(*Process) bool {
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err != nil {
				return false
			}
			c.Close()
			return true
		})
	return g
}
