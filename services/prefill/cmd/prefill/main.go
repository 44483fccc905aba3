// Command prefill is the Switchyard prefill service; see services/prefill/README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"switchyard.dev/services/prefill/internal/app"
)

// version is stamped at build time: -ldflags "-X main.version=$(cat VERSION)".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, version, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
