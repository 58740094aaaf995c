package record

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
// into Path, which CheckRecord then checks (clean, relative, no NUL, not
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
		return "", fmt.Errorf("record: %sBytes is not base64: %v", field, err)
	}
	return string(raw), nil
}

// Lists of names (a rewind's paths, skipped paths, conflicts) travel the
// same way: the list holds the readable forms, and a sibling list named
// after it with "Bytes" ("pathsBytes", "skippedBytes") holds, for each name
// at the same position, its exact bytes in base64, or "" for a name that
// is valid UTF-8. The sibling is left out when every name is UTF-8.

// ReadableAll is Readable of each name (nil stays nil).
func ReadableAll(names []string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = Readable(n)
	}
	return out
}

// ExactBytesAll is the "...Bytes" sibling of names: nil when every name is
// valid UTF-8.
func ExactBytesAll(names []string) []string {
	var out []string
	for i, n := range names {
		if b := ExactBytes(n); b != "" {
			if out == nil {
				out = make([]string, len(names))
			}
			out[i] = b
		}
	}
	return out
}

// FromBytesAll is the list of names that texts and their "...Bytes"
// sibling b64 stand for (texts itself when b64 is empty).
func FromBytesAll(field string, texts, b64 []string) ([]string, error) {
	if len(b64) == 0 {
		return texts, nil
	}
	if len(b64) != len(texts) {
		return nil, fmt.Errorf("record: %sBytes has %d names for %d", field, len(b64), len(texts))
	}
	out := make([]string, len(texts))
	for i := range texts {
		n, err := FromBytes(field, texts[i], b64[i])
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// A NameField is one field of a value's JSON form that holds a name, or a
// list of names, and its "...Bytes" sibling: how every type that carries
// names in JSON writes and reads them, with MarshalNames and
// UnmarshalNames. Make one with Name or Names.
type NameField struct {
	key         string
	text, b64   *string
	texts, b64s *[]string
}

// Name is the name field key, at text, whose exact bytes go in b64.
func Name(key string, text, b64 *string) NameField {
	return NameField{key: key, text: text, b64: b64}
}

// Names is the list of names key, at texts, whose exact bytes go in b64.
func Names(key string, texts, b64 *[]string) NameField {
	return NameField{key: key, texts: texts, b64s: b64}
}

// MarshalNames writes j, a pointer to a value's JSON form, after putting
// each field's readable form in place and its exact bytes beside it.
func MarshalNames(j any, fields ...NameField) ([]byte, error) {
	for _, f := range fields {
		if f.text != nil {
			*f.b64, *f.text = ExactBytes(*f.text), Readable(*f.text)
		} else {
			*f.b64s, *f.texts = ExactBytesAll(*f.texts), ReadableAll(*f.texts)
		}
	}
	return json.Marshal(j)
}

// UnmarshalNames reads data into j, a pointer to a value's JSON form, and
// then each field's name from its exact bytes where they were given.
func UnmarshalNames(data []byte, j any, fields ...NameField) error {
	if err := json.Unmarshal(data, j); err != nil {
		return err
	}
	var err error
	for _, f := range fields {
		if f.text != nil {
			*f.text, err = FromBytes(f.key, *f.text, *f.b64)
		} else {
			*f.texts, err = FromBytesAll(f.key, *f.texts, *f.b64s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// fileStateJSON is FileState as JSON holds it; fileStateFields has
// FileState's fields without its methods (so marshalling it does not
// recurse). Likewise for the other types below.
type fileStateJSON struct {
	fileStateFields
	PathBytes   string `json:"pathBytes,omitempty"`
	TargetBytes string `json:"targetBytes,omitempty"`
}

type fileStateFields FileState

func (j *fileStateJSON) names() []NameField {
	return []NameField{Name("path", &j.Path, &j.PathBytes), Name("target", &j.Target, &j.TargetBytes)}
}

// MarshalJSON writes the record with pathBytes (and targetBytes) when the
// name is not valid UTF-8.
func (s FileState) MarshalJSON() ([]byte, error) {
	j := fileStateJSON{fileStateFields: fileStateFields(s)}
	return MarshalNames(&j, j.names()...)
}

// UnmarshalJSON reads a record, taking the name from pathBytes (and the
// target from targetBytes) when present.
func (s *FileState) UnmarshalJSON(data []byte) error {
	var j fileStateJSON
	if err := UnmarshalNames(data, &j, j.names()...); err != nil {
		return err
	}
	*s = FileState(j.fileStateFields)
	return nil
}

type reportJSON struct {
	reportFields
	SkippedBytes []string `json:"skippedBytes,omitempty"`
}

type reportFields Report

// MarshalJSON writes the report with skippedBytes when a skipped name is
// not valid UTF-8.
func (r Report) MarshalJSON() ([]byte, error) {
	j := reportJSON{reportFields: reportFields(r)}
	return MarshalNames(&j, Names("skipped", &j.Skipped, &j.SkippedBytes))
}

// UnmarshalJSON reads a report, the exact bytes winning.
func (r *Report) UnmarshalJSON(data []byte) error {
	var j reportJSON
	if err := UnmarshalNames(data, &j, Names("skipped", &j.Skipped, &j.SkippedBytes)); err != nil {
		return err
	}
	*r = Report(j.reportFields)
	return nil
}

type rewindPayloadJSON struct {
	rewindPayloadFields
	PathsBytes []string `json:"pathsBytes,omitempty"`
}

type rewindPayloadFields RewindPayload

// MarshalJSON writes the payload with pathsBytes when a path is not valid
// UTF-8.
func (p RewindPayload) MarshalJSON() ([]byte, error) {
	j := rewindPayloadJSON{rewindPayloadFields: rewindPayloadFields(p)}
	return MarshalNames(&j, Names("paths", &j.Paths, &j.PathsBytes))
}

// UnmarshalJSON reads a payload, the exact bytes winning.
func (p *RewindPayload) UnmarshalJSON(data []byte) error {
	var j rewindPayloadJSON
	if err := UnmarshalNames(data, &j, Names("paths", &j.Paths, &j.PathsBytes)); err != nil {
		return err
	}
	*p = RewindPayload(j.rewindPayloadFields)
	return nil
}

type foreignJSON struct {
	foreignFields
	PathBytes string `json:"pathBytes,omitempty"`
}

type foreignFields Foreign

// MarshalJSON writes the path with pathBytes when it is not valid UTF-8.
func (f Foreign) MarshalJSON() ([]byte, error) {
	j := foreignJSON{foreignFields: foreignFields(f)}
	return MarshalNames(&j, Name("path", &j.Path, &j.PathBytes))
}

// UnmarshalJSON reads a Foreign, the exact bytes winning.
func (f *Foreign) UnmarshalJSON(data []byte) error {
	var j foreignJSON
	if err := UnmarshalNames(data, &j, Name("path", &j.Path, &j.PathBytes)); err != nil {
		return err
	}
	*f = Foreign(j.foreignFields)
	return nil
}
