// Command planner is the Switchyard planner service; see services/planner/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/planner/internal/app"
)

// version is stamped at build time: -ldflags "-X main.version=$(cat VERSION)+commit".
var version = "dev"

func main() { os.Exit(service.Main(app.Spec(version))) }
