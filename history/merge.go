package history

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
)

// MergeTitle is a merge as the log (and every front end) names it: the
// fork and the steps it brought in, numbered in the fork's own log:
// `merge of /w/fork (forked at 12; its steps 3 "Edit a.go", 5 "Bash: go
// test")`.
func MergeTitle(rec record.MergeRecord) string {
	var steps []string
	for i, s := range rec.Steps {
		if i == 5 {
			steps = append(steps, fmt.Sprintf("and %d more", len(rec.Steps)-5))
			break
		}
		if s.Label == "" {
			steps = append(steps, fmt.Sprintf("%d", s.Sequence))
		} else {
			steps = append(steps, fmt.Sprintf("%d %s", s.Sequence, strconv.Quote(s.Label)))
		}
	}
	what := "no steps recorded"
	switch len(rec.Steps) {
	case 0:
	case 1:
		what = "its step " + steps[0]
	default:
		what = "its steps " + strings.Join(steps, ", ")
	}
	return fmt.Sprintf("merge of %s (%s; %s)", quote.Name(rec.Dir), rec.Made(), what)
}
