// Command decode is the Switchyard decode service; see services/decode/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/decode/internal/app"
)

// version is stamped at build time: -ldflags "-X main.version=$(cat VERSION)+commit".
var version = "dev"

func main() { os.Exit(service.Main(app.Spec(version))) }
