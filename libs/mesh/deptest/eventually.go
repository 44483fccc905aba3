package deptest

import (
	"testing"
	"time"
)

// Eventually polls cond until it holds, and fails the test if it does not
// within timeout. It is for state that other goroutines or processes reach
// on their own (a watch delivering, a stream being released); what names
// that state in the failure message.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
