package index

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Names are bytes: a file name need not be UTF-8, and encoding/json would
// turn every byte that is not into U+FFFD, merging "bad\xff", "bad\xfe"
// and "bad\uFFFD" into one name. So a checkpoint's record keeps such a
// name losslessly (SPEC, Events): "path" holds a readable form (each byte
// that is not UTF-8 shown as U+FFFD) and "pathBytes" the exact bytes in
// base64; likewise "target" and "targetBytes" for a symlink's target.
// Readers use the bytes when present. In memory, FileState.Path is always
// the exact bytes; only JSON needs the second field.
//
// pathBytes comes from the store and is untrusted like path: it is decoded
// into Path, which checkRecord then checks (clean, relative, no NUL, not
// reserved) exactly as it checks a path given as text.

// Readable is s with each byte that is not part of valid UTF-8 replaced by
// U+FFFD, one for each byte (as encoding/json would write it).
func Readable(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			b.WriteRune(utf8.RuneError)
			i++
			continue
		}
		b.WriteString(s[i : i+size])
		i += size
	}
	return b.String()
}

// ExactBytes is the base64 of s when JSON cannot carry s as it is ("" when
// it can).
func ExactBytes(s string) string {
	if utf8.ValidString(s) {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// FromBytes decodes a "...Bytes" field into the name it stands for; an
// empty field leaves text as it is.
func FromBytes(field, text, b64 string) (string, error) {
	if b64 == "" {
		return text, nil
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("index: %sBytes is not base64: %v", field, err)
	}
	return string(raw), nil
}

// fileStateJSON is FileState as JSON holds it: the exact bytes of a name
// that is not UTF-8 beside its readable form.
type fileStateJSON struct {
	fileStateFields
	PathBytes   string `json:"pathBytes,omitempty"`
	TargetBytes string `json:"targetBytes,omitempty"`
}

// fileStateFields has FileState's fields without its methods (so
// marshalling it does not recurse).
type fileStateFields FileState

// MarshalJSON writes the record with pathBytes (and targetBytes) when the
// name is not valid UTF-8.
func (s FileState) MarshalJSON() ([]byte, error) {
	j := fileStateJSON{fileStateFields: fileStateFields(s), PathBytes: ExactBytes(s.Path), TargetBytes: ExactBytes(s.Target)}
	j.Path, j.Target = Readable(s.Path), Readable(s.Target)
	return json.Marshal(j)
}

// UnmarshalJSON reads a record, taking the name from pathBytes (and the
// target from targetBytes) when present. Records written before pathBytes
// existed read as they always did.
func (s *FileState) UnmarshalJSON(data []byte) error {
	var j fileStateJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	var err error
	if j.Path, err = FromBytes("path", j.Path, j.PathBytes); err != nil {
		return err
	}
	if j.Target, err = FromBytes("target", j.Target, j.TargetBytes); err != nil {
		return err
	}
	*s = FileState(j.fileStateFields)
	return nil
}
