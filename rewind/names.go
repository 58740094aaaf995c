package rewind

import "github.com/zerofs/zerofs/internal/durable"

// tempName is the name of a temporary file a rewind writes beside name
// before renaming it into place: the one scheme internal/durable defines
// for every temporary file zerofs makes.
func tempName(name string) string { return durable.TempName(name) }
