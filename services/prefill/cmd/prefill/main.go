// Command prefill is the Switchyard prefill service; see services/prefill/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/prefill"
)

func main() { os.Exit(service.Main(prefill.Spec(os.Getenv))) }
