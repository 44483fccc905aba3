// Command planner is the Switchyard planner service; see services/planner/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/planner"
)

func main() { os.Exit(service.Main(planner.Spec(os.Getenv))) }
