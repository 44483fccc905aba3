// Command kvbm-controller is the Switchyard kvbm-controller service; see services/kvbm-controller/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	kvbmcontroller "switchyard.dev/services/kvbm-controller"
)

func main() { os.Exit(service.Main(kvbmcontroller.Spec(os.Getenv))) }
