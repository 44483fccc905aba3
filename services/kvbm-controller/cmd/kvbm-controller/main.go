// Command kvbm-controller is the Switchyard kvbm-controller service; see services/kvbm-controller/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/kvbm-controller/internal/app"
)

// version is stamped at build time: -ldflags "-X main.version=$(cat VERSION)+commit".
var version = "dev"

func main() { os.Exit(service.Main(app.Spec(version))) }
