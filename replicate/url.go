package replicate

import (
	"fmt"
	"strings"
)

// URL is a replica's place: s3://Bucket/Prefix.
type URL struct {
	Bucket string
	Prefix string // no leading or trailing slash; may be empty
}

// ParseURL parses s3://BUCKET[/PREFIX].
func ParseURL(s string) (URL, error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return URL{}, fmt.Errorf("replicate: %q is not an s3://BUCKET/PREFIX URL", s)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	prefix = strings.Trim(prefix, "/")
	if bucket == "" {
		return URL{}, fmt.Errorf("replicate: %q names no bucket", s)
	}
	for _, part := range strings.Split(prefix, "/") {
		if prefix != "" && (part == "" || part == "." || part == "..") {
			return URL{}, fmt.Errorf("replicate: %q: the prefix must be clean (no empty, . or .. part)", s)
		}
	}
	return URL{Bucket: bucket, Prefix: prefix}, nil
}

// String is the URL as the user writes it.
func (u URL) String() string {
	if u.Prefix == "" {
		return "s3://" + u.Bucket
	}
	return "s3://" + u.Bucket + "/" + u.Prefix
}

// key is the object name of name below the prefix.
func (u URL) key(name string) string {
	if u.Prefix == "" {
		return name
	}
	return u.Prefix + "/" + name
}
