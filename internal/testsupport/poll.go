package testsupport

import (
	"errors"
	"time"
)

// ErrTimeout is what Poll returns when the deadline passes.
var ErrTimeout = errors.New("testsupport: timed out")

// Poll calls cond until it returns true (nil) or timeout passes
// (ErrTimeout), backing off from 1 ms to 50 ms between calls. cond is
// always called at least once, and once more after the deadline.
func Poll(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return ErrTimeout
		}
		time.Sleep(delay)
	}
}
