package app

import (
	"testing"

	"switchyard.dev/libs/worker/servicetest"
)

func TestGRPCConformance(t *testing.T) {
	t.Parallel()
	servicetest.GRPCConformance(t, Spec("v0.0.0-test"), "prefill")
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	servicetest.Generate(t, Spec("v0.0.0-test"))
}
