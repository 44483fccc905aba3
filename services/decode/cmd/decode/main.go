// Command decode is the Switchyard decode service; see services/decode/README.md.
package main

import (
	"os"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/decode"
)

func main() { os.Exit(service.Main(decode.Spec(os.Getenv))) }
