// Command frontend is the Switchyard frontend service; see services/frontend/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/frontend"
)

func main() { os.Exit(service.Main(frontend.Spec(os.Getenv))) }
