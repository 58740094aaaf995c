package index

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/zerofs/zerofs/record"
	"pgregory.net/rapid"
)

// TestStateCodecKeepsEveryField: the index's packed states carry every
// field of FileState but the path (kept once per path). It sets each field
// to a value that is not its zero and checks the round trip, so a field
// added to FileState without the codec fails here.
func TestStateCodecKeepsEveryField(t *testing.T) {
	var f record.FileState
	v := reflect.ValueOf(&f).Elem()
	for i := range v.NumField() {
		fv, name := v.Field(i), v.Type().Field(i).Name
		if name == "Path" {
			continue
		}
		switch {
		case setNonZero(fv, i):
		default:
			t.Fatalf("FileState.%s has a type (%s) this test cannot fill: extend setNonZero and the codec", name, fv.Type())
		}
	}
	valid := "ab34567890abcdef0123456789abcdef0123456789abcdef0123456789abcdef" // stored raw
	for _, blob := range []string{valid, "not-a-blob-id", ""} {
		for _, kind := range []record.Kind{record.KindFile, record.KindDir, record.KindSymlink, "", "fifo?"} {
			g := f
			g.Blob, g.Kind = blob, kind
			b := encodeState(nil, g)
			if n := stateSize(b); n != len(b) {
				t.Fatalf("stateSize = %d, want %d", n, len(b))
			}
			got := decodeState(append(b, 0xff, 0xff)) // trailing bytes are the next state's
			if !reflect.DeepEqual(got, g) {
				for i := range v.NumField() {
					if !reflect.DeepEqual(reflect.ValueOf(got).Field(i).Interface(), reflect.ValueOf(g).Field(i).Interface()) {
						t.Errorf("the packed state loses FileState.%s: got %v, want %v (extend encodeState, decodeState and stateSize, and bump snapshotVersion)",
							v.Type().Field(i).Name, reflect.ValueOf(got).Field(i), reflect.ValueOf(g).Field(i))
					}
				}
				t.FailNow()
			}
		}
	}
}

// setNonZero sets fv to a value that is not its zero value; false for a type
// it does not know.
func setNonZero(fv reflect.Value, i int) bool {
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(fmt.Sprintf("value of field %d", i))
	case reflect.Bool:
		fv.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		fv.SetInt(int64(-1000 - i))
	case reflect.Uint32, reflect.Uint64, reflect.Uint:
		fv.SetUint(uint64(0o4755 + i))
	case reflect.Pointer:
		p := reflect.New(fv.Type().Elem())
		if fv.Type().Elem() == reflect.TypeOf(time.Time{}) {
			p.Elem().Set(reflect.ValueOf(time.Date(2026, 12, 3, 1, 2, 3, 456789012, time.UTC)))
		} else if !setNonZero(p.Elem(), i) {
			return false
		}
		fv.Set(p)
	case reflect.Map:
		if fv.Type() != reflect.TypeOf(map[string][]byte(nil)) {
			return false
		}
		fv.Set(reflect.ValueOf(map[string][]byte{
			"user.field": []byte(fmt.Sprintf("value of field %d", i)),
			"trusted.b":  {},
		}))
	default:
		return false
	}
	return true
}

// TestCheckPackedAgreesWithCheckRecord: a snapshot's records are checked
// packed (checkPacked) and the log's decoded (checkRecord); both must give
// the same verdict for every record.
func TestCheckPackedAgreesWithCheckRecord(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := record.FileState{
			Path:    rapid.SampledFrom([]string{"", "a", "d/b"}).Draw(rt, "path"),
			Kind:    record.Kind(rapid.SampledFrom([]string{"file", "dir", "symlink", "", "fifo"}).Draw(rt, "kind")),
			Blob:    rapid.SampledFrom([]string{"", "ab34567890abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "AB34567890ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF", "xyz"}).Draw(rt, "blob"),
			Absent:  rapid.Bool().Draw(rt, "absent"),
			Skipped: rapid.Bool().Draw(rt, "skipped"),
			Bytes:   rapid.Int64Range(-2, 2).Draw(rt, "bytes"),
			Mode:    rapid.SampledFrom([]uint32{0, 0o644, 0o4755, 0o7777, 0o10000, 0o100644}).Draw(rt, "mode"),
			Target:  rapid.SampledFrom([]string{"", "t", "a\x00b"}).Draw(rt, "target"),
			Reason:  rapid.SampledFrom([]string{"", "why"}).Draw(rt, "reason"),
		}
		packed := encodeState(nil, f)
		got, want := checkPacked(f.Path, packed), record.CheckRecord(f)
		if (got == "") != (want == "") {
			rt.Fatalf("%+v: checkPacked says %q, checkRecord %q", f, got, want)
		}
	})
}
