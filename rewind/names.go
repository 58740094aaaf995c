package rewind

import (
	"crypto/rand"
	"encoding/hex"
)

// tempName is the name of a temporary file a rewind writes beside name
// before renaming it into place.
func tempName(name string) string {
	var b [6]byte
	rand.Read(b[:])
	if len(name) > 200 {
		name = name[:200]
	}
	return ".zerofs-tmp-" + hex.EncodeToString(b[:]) + "-" + name
}
