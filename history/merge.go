package history

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/rewind"
)

// MergeTitle is a merge as the log (and every front end) names it: the
// fork and the steps it brought in, `merge of /w/fork (forked at 12):
// step 3 "Edit a.go", step 5 "Bash: go test"`.
func MergeTitle(rec rewind.MergeRecord) string {
	var steps []string
	for i, s := range rec.Steps {
		if i == 5 {
			steps = append(steps, fmt.Sprintf("and %d more", len(rec.Steps)-5))
			break
		}
		if s.Label == "" {
			steps = append(steps, fmt.Sprintf("step %d", s.Sequence))
		} else {
			steps = append(steps, fmt.Sprintf("step %d %s", s.Sequence, strconv.Quote(s.Label)))
		}
	}
	if len(steps) == 0 {
		steps = []string{"no step"}
	}
	return fmt.Sprintf("merge of %s (forked at %d): %s", quote.Name(rec.Dir), rec.Base, strings.Join(steps, ", "))
}
