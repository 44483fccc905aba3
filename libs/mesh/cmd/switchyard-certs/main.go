// Command switchyard-certs makes the certificates of a local mesh with
// mutual TLS: a CA and one certificate per service (plus "public" for the
// frontend's OpenAI listener), valid for 127.0.0.1, ::1 and localhost, in
// one directory. Run again, it keeps what is still good (make certs).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"switchyard.dev/libs/mesh/tlsconf/certgen"
)

func main() { os.Exit(run(os.Args[1:])) }

func defaultDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "switchyard", "certs")
	}
	return "certs"
}

func run(args []string) int {
	fs := flag.NewFlagSet("switchyard-certs", flag.ContinueOnError)
	dir := fs.String("dir", defaultDir(), "directory to write ca.crt, ca.key and <name>.crt/.key into")
	names := fs.String("names", "frontend,router,prefill,decode,kvbm-controller,planner,public",
		"comma-separated certificates to make")
	hosts := fs.String("hosts", strings.Join(certgen.LocalHosts, ","), "comma-separated IPs and DNS names every certificate is valid for")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	made, err := certgen.Ensure(*dir, split(*names), split(*hosts))
	if err != nil {
		fmt.Fprintln(os.Stderr, "switchyard-certs:", err)
		return 1
	}
	if len(made) == 0 {
		fmt.Printf("certificates in %s are current\n", *dir)
		return 0
	}
	fmt.Printf("made %s in %s\n", strings.Join(made, ", "), *dir)
	return 0
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
