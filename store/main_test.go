package store

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must stop every goroutine it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
