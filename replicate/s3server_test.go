package replicate

import (
	"testing"

	"github.com/zerofs/zerofs/internal/testsupport"
)

// startS3 runs a real S3 server for the test (testsupport.StartS3).
func startS3(t *testing.T) *testsupport.S3Server { return testsupport.StartS3(t) }
