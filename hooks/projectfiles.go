package hooks

// ProjectFiles are the files, relative to the project's root, whose
// content decides whether a's project hooks run: the configuration a
// project install writes, and for OpenCode the plugin file earlier
// installs put in .opencode. A rewind that changes one of them changes
// what is recorded after it.
func (a Agent) ProjectFiles() []string {
	files := []string{a.projectFile}
	if a.kind == kindPlugin {
		files = append(files, opencodeLegacyFile)
	}
	return files
}
