package record

// IgnoreFile is the file at the workspace root whose gitignore patterns
// name paths zerofs never captures and never touches (SPEC: .zeroignore;
// mount's --ignore adds patterns after its own). It is never ignored
// itself: a change to it is recorded like any other.
const IgnoreFile = ".zeroignore"

// IgnoreStatus is what a workspace ignores now: the daemon's status
// ("ignore" in .zero/status and in `zerofs status --json`).
type IgnoreStatus struct {
	// Patterns is the number of patterns in effect.
	Patterns int `json:"patterns"`
	// File holds IgnoreFile's patterns in effect (none when it is absent
	// or not used), Flags --ignore's.
	File  []string `json:"file,omitempty"`
	Flags []string `json:"flags,omitempty"`
	// Err says why IgnoreFile is not used ("" when it is, or there is
	// none).
	Err string `json:"error,omitempty"`
}
