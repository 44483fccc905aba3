// Command release builds Switchyard's release artifacts: for each service,
// a static linux binary stamped with the service's own version
// (services/<svc>/VERSION), a .tar.gz archive of it with the service's
// CHANGELOG.md, and an OCI image of it (built without a container daemon),
// with every file's SHA-256 in SHA256SUMS, into one directory:
//
//	go run ./cmd/release -out dist              # every service
//	go run ./cmd/release -out dist router decode # some
//
// A service whose CHANGELOG.md has no section for its VERSION is refused:
// a release says what changed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"switchyard.dev/cmd/release/internal/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	out := fs.String("out", "dist", "directory the artifacts are written to")
	root := fs.String("root", ".", "repository root")
	arch := fs.String("arch", "amd64", "GOARCH of the binaries and images (linux)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	arts, err := release.Build(ctx, release.Options{Root: *root, Out: *out, Arch: *arch, Services: fs.Args()})
	for _, a := range arts {
		fmt.Printf("%s %s\n", a.SHA256, a.Path)
	}
	return err
}
