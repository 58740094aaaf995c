package rewind

import "github.com/zerofs/zerofs/rewind/internal/index"

// Readable, ExactBytes and FromBytes are how a name that is not UTF-8
// travels in JSON (see rewind/internal/index/pathbytes.go): a readable
// form beside its exact bytes in base64. Other JSON writers of names
// (log --json) use them to follow the checkpoints' convention.
func Readable(s string) string { return index.Readable(s) }

// ExactBytes is the base64 of s when JSON cannot carry s as it is ("" when
// it can).
func ExactBytes(s string) string { return index.ExactBytes(s) }

// FromBytes is the name a "...Bytes" field stands for (text itself when
// the field is empty).
func FromBytes(field, text, b64 string) (string, error) { return index.FromBytes(field, text, b64) }
