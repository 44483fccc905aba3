// Command prefill is the Switchyard prefill service; see services/prefill/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/prefill/internal/app"
)

// version is stamped at build time: -ldflags "-X main.version=$(cat VERSION)+commit".
var version = "dev"

func main() { os.Exit(service.Main(app.Spec(version))) }
