package timeline

import (
	"net/http"

	"github.com/zerofs/zerofs/record"
)

// Branch is one branch of the workspace in /api/branches: where it is
// mounted, the state of this workspace it began from, whether it is
// mounted now, and what it holds that no merge brought in.
type Branch struct {
	Dir  string     `json:"dir"`
	Base record.Seq `json:"base"`
	// Mounted: a zerofs mount answers at Dir.
	Mounted bool `json:"mounted"`
	// Changed counts the paths its copy-up layer holds.
	Changed int `json:"changed"`
	// Merged is the sequence of its last merge here (0: never).
	Merged   record.Seq `json:"merged,omitempty"`
	Unmerged bool       `json:"unmerged"`
}

// Branches is /api/branches.
type Branches struct {
	Branches []Branch `json:"branches"`
}

func (s *Server) branches(w http.ResponseWriter, r *http.Request) {
	out := Branches{Branches: []Branch{}}
	if s.opts.Branches != nil {
		bs, err := s.opts.Branches(r.Context())
		if err != nil {
			s.fail(w, status(err), err)
			return
		}
		out.Branches = append(out.Branches, bs...)
	}
	writeJSON(w, http.StatusOK, out)
}
