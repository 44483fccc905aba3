// Command frontend is the Switchyard frontend service; see services/frontend/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/frontend/internal/app"
)

// version is stamped at build time: -ldflags "-X main.version=$(cat VERSION)+commit".
var version = "dev"

func main() { os.Exit(service.Main(app.Spec(version, os.Getenv))) }
