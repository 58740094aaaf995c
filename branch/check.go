package branch

import "github.com/zerofs/zerofs/history"

// Check is dir as Create takes it for a new branch of ws (absolute and
// clean), or why Create would refuse it: inside the workspace (or holding
// it), or neither missing nor an empty directory. It makes nothing: a dry
// run's check (MCP zerofs_branch).
func Check(ws *history.Workspace, dir string) (string, error) {
	d, err := checkDir(ws, dir)
	if err != nil {
		return "", err
	}
	return d, checkEmpty(d)
}
