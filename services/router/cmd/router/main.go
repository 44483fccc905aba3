// Command router is the Switchyard router service; see services/router/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/router"
)

func main() { os.Exit(service.Main(router.Spec(os.Getenv))) }
