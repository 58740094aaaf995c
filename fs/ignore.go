package fs

import (
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// ignoreReport is the status's word on ignored paths: nil when nothing is
// ignored and there is no .zeroignore the engine could not use.
func ignoreReport(eng *rewind.Engine) *record.IgnoreStatus {
	st := eng.IgnoreStatus()
	if st.Patterns == 0 && st.Err == "" {
		return nil
	}
	return &st
}
