package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/zerofs/zerofs/internal/quote"
	"github.com/zerofs/zerofs/record"
	"github.com/zerofs/zerofs/rewind"
)

// A FileDiff is one path's difference between two states, as git prints
// it: Text is the "diff --git" header and the unified diff (3 lines of
// context), or "Binary files ... differ". A path that changed between file
// and symlink (or from or to a directory) is, like git shows it, a deletion
// followed by an addition: two FileDiffs with the same Path.
type FileDiff struct {
	Path string
	// From is a renamed file's old path ("" when not renamed): a file
	// deleted at a and one added at b with the same or similar content
	// (half or more of their lines in common) are one rename, as git
	// shows it ("rename from", "rename to", then the content's diff).
	From string
	Text string
}

// Diff compares the states at a and b (either may be Now) of every path
// under filters (workspace paths; none: all), sorted by path. A sequence
// not in the history is a *SeqError.
func Diff(src Source, a, b record.Seq, filters []string) ([]FileDiff, error) {
	d := &differ{src: src, a: a, b: b, stats: map[statKey]Node{}}
	for _, t := range []record.Seq{a, b} {
		if _, err := d.stat("", t); err != nil {
			return nil, ExplainSeq(src, t, err)
		}
	}
	files, err := d.changedPaths(filters)
	if err != nil {
		return nil, err
	}
	renamed, err := d.renames(files)
	if err != nil {
		return nil, err
	}
	gone := map[string]bool{}
	for _, from := range renamed {
		gone[from] = true
	}
	var out []FileDiff
	for _, p := range files {
		if gone[p] {
			continue
		}
		if from, ok := renamed[p]; ok {
			text, err := d.rename(from, p)
			if err != nil {
				return nil, err
			}
			out = append(out, FileDiff{Path: p, From: from, Text: text})
			continue
		}
		fds, err := d.file(p)
		if err != nil {
			return nil, err
		}
		out = append(out, fds...)
	}
	return out, nil
}

// differ compares two states of one history.
type differ struct {
	src   Source
	a, b  record.Seq
	stats map[statKey]Node
}

type statKey struct {
	path string
	t    record.Seq
}

func (d *differ) stat(p string, t record.Seq) (Node, error) {
	k := statKey{p, t}
	if n, ok := d.stats[k]; ok {
		return n, nil
	}
	n, err := d.src.Stat(p, t)
	if err != nil {
		return n, err
	}
	d.stats[k] = n
	return n, nil
}

// changedPaths lists, sorted, the non-directory paths that may differ
// between a and b: a path can differ only if a checkpoint between them
// names it, or if it lies under a directory that exists on one side only
// (a renamed directory's new subtree is named by no checkpoint), or under
// a side of a rename record (a directory renamed away and back, or onto
// an empty directory, is a directory on both sides).
func (d *differ) changedPaths(filters []string) ([]string, error) {
	lo, hi := min(d.a, d.b), max(d.a, d.b)
	cands := map[string]bool{}
	deep := map[string]bool{} // directories to expand even when on both sides
	for ev, err := range d.src.Events() {
		if err != nil {
			return nil, err
		}
		if ev.Seq <= lo || ev.Seq > hi || ev.Type != record.TypeCheckpoint {
			continue
		}
		var cp record.Checkpoint
		if json.Unmarshal(ev.Payload, &cp) != nil {
			continue
		}
		for _, f := range cp.Files {
			if matches(filters, f.Path) {
				cands[f.Path] = true
				if f.RenamedTo != "" || f.RenamedFrom != "" {
					deep[f.Path] = true
				}
			}
		}
	}
	queue := make([]string, 0, len(cands))
	for p := range cands {
		queue = append(queue, p)
	}
	var files []string
	listed := map[string]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		na, err := d.stat(p, d.a)
		if err != nil {
			return nil, err
		}
		nb, err := d.stat(p, d.b)
		if err != nil {
			return nil, err
		}
		if (na.Exists && na.Kind != record.KindDir) || (nb.Exists && nb.Kind != record.KindDir) {
			if (Under(p, filters) || len(filters) == 0) && !listed[p] {
				listed[p] = true
				files = append(files, p)
			}
		}
		// Expand a directory that exists on one side only.
		for _, side := range []struct {
			n, other Node
			t        record.Seq
		}{{na, nb, d.a}, {nb, na, d.b}} {
			if side.n.Kind != record.KindDir || (side.other.Kind == record.KindDir && !deep[p]) {
				continue
			}
			names, err := d.src.List(p, side.t)
			if err != nil {
				return nil, err
			}
			for _, name := range names {
				c := path.Join(p, name)
				if matches(filters, c) && (!cands[c] || (deep[p] && !deep[c])) {
					cands[c] = true
					deep[c] = deep[c] || deep[p]
					queue = append(queue, c)
				}
			}
		}
	}
	sort.Strings(files)
	return files, nil
}

// matches reports whether p is one of filters, under one, or above one
// (all paths when there are no filters).
func matches(filters []string, p string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if f == "" || p == f || strings.HasPrefix(p, f+"/") || strings.HasPrefix(f, p+"/") {
			return true
		}
	}
	return false
}

// Label names a state in the ---/+++ lines: "@42", or "now".
func Label(t record.Seq) string {
	if t == Now {
		return "now"
	}
	return fmt.Sprintf("@%d", t)
}

// gitMode is the mode git prints: type bits and permission bits.
func gitMode(n Node) uint32 {
	switch n.Kind {
	case record.KindSymlink:
		return 0o120000
	case record.KindDir:
		return 0o040000
	}
	return 0o100000 | n.Mode&0o7777
}

// file is p's diff, if it differs.
func (d *differ) file(p string) ([]FileDiff, error) {
	na, _ := d.stat(p, d.a)
	nb, _ := d.stat(p, d.b)
	if na.Kind == record.KindDir {
		na = Node{}
	}
	if nb.Kind == record.KindDir {
		nb = Node{}
	}
	var pairs [][2]Node
	if na.Exists && nb.Exists && na.Kind != nb.Kind {
		pairs = [][2]Node{{na, {}}, {{}, nb}}
	} else {
		pairs = [][2]Node{{na, nb}}
	}
	var out []FileDiff
	for _, pr := range pairs {
		text, err := d.pair(p, pr[0], pr[1])
		if err != nil {
			return nil, err
		}
		if text != "" {
			out = append(out, FileDiff{Path: p, Text: text})
		}
	}
	return out, nil
}

func (d *differ) content(p string, t record.Seq, n Node) ([]byte, error) {
	if !n.Exists {
		return nil, nil
	}
	if n.Kind == record.KindSymlink {
		return []byte(n.Target), nil
	}
	if n.Skipped {
		return nil, fmt.Errorf("%s at %s: %w (%s)", quote.Name(p), Label(t), rewind.ErrSkipped, quote.Name(n.Reason))
	}
	return d.src.Content(p, t)
}

func (d *differ) pair(p string, na, nb Node) (string, error) {
	if !na.Exists && !nb.Exists {
		return "", nil
	}
	if big(na) || big(nb) {
		return d.bigPair(p, na, nb)
	}
	ca, err := d.content(p, d.a, na)
	if err != nil {
		return "", err
	}
	cb, err := d.content(p, d.b, nb)
	if err != nil {
		return "", err
	}
	same := bytes.Equal(ca, cb)
	xl, err := d.xattrs(p, na, nb)
	if err != nil {
		return "", err
	}
	var hdr strings.Builder
	qa, qb, ok := header(&hdr, p, na, nb, same && xl == "")
	if !ok {
		return "", nil // identical: the capture changed nothing in the end
	}
	hdr.WriteString(xl)
	from, to := fmt.Sprintf("%s\t(%s)", qa, Label(d.a)), fmt.Sprintf("%s\t(%s)", qb, Label(d.b))
	if !na.Exists {
		from = "/dev/null"
	}
	if !nb.Exists {
		to = "/dev/null"
	}
	var body string
	switch {
	case same:
	case isBinary(ca) || isBinary(cb):
		body = binaryLine(qa, qb, na, nb)
	default:
		sa, sb := string(ca), string(cb)
		body, err = udiff.ToUnified(from, to, sa, udiff.Lines(sa, sb), udiff.DefaultContextLines)
		if err != nil {
			return "", fmt.Errorf("diff %s: %w", p, err)
		}
	}
	return hdr.String() + body, nil
}

// xattrs are the lines saying which extended attributes (ACLs among them)
// differ between a file's two sides, when both exist and both are known.
func (d *differ) xattrs(p string, na, nb Node) (string, error) {
	if !na.Exists || !nb.Exists || na.Kind != nb.Kind || na.Kind == record.KindSymlink {
		return "", nil
	}
	xa, err := d.src.Xattrs(p, d.a)
	if err != nil || xa == nil {
		return "", err
	}
	xb, err := d.src.Xattrs(p, d.b)
	if err != nil {
		return "", err
	}
	return xattrLines(xa, xb), nil
}

// bigPair is pair for a file over bigFile on either side: compared by
// sha256 (streamed, never read whole) and shown as binary.
func (d *differ) bigPair(p string, na, nb Node) (string, error) {
	for _, side := range []struct {
		n Node
		t record.Seq
	}{{na, d.a}, {nb, d.b}} {
		if side.n.Exists && side.n.Skipped {
			_, err := d.content(p, side.t, side.n) // the error that says why
			return "", err
		}
	}
	same := false
	if na.Exists && nb.Exists && na.Kind == nb.Kind {
		ia, ib := contentID(d.src, p, d.a, na), contentID(d.src, p, d.b, nb)
		same = ia != "" && ia == ib
	}
	xl, err := d.xattrs(p, na, nb)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	qa, qb, ok := header(&out, p, na, nb, same && xl == "")
	if !ok {
		return "", nil
	}
	out.WriteString(xl)
	if !same {
		out.WriteString(binaryLine(qa, qb, na, nb))
	}
	return out.String(), nil
}

// header writes the git header of p's pair to w: "diff --git", then "new
// file mode", "deleted file mode" or a mode change. Names are quoted as git
// quotes them ("a/x\ny"): a name can never split a header or smuggle a line
// into the diff. ok is false when there is nothing to show: both sides exist
// with the same mode and, as the caller compared them, the same content.
func header(w *strings.Builder, p string, na, nb Node, same bool) (qa, qb string, ok bool) {
	qa, qb = quote.Name("a/"+p), quote.Name("b/"+p)
	switch {
	case na.Exists && nb.Exists && gitMode(na) == gitMode(nb) && same:
		return qa, qb, false
	case !na.Exists:
		fmt.Fprintf(w, "diff --git %s %s\nnew file mode %06o\n", qa, qb, gitMode(nb))
	case !nb.Exists:
		fmt.Fprintf(w, "diff --git %s %s\ndeleted file mode %06o\n", qa, qb, gitMode(na))
	case gitMode(na) != gitMode(nb):
		fmt.Fprintf(w, "diff --git %s %s\nold mode %06o\nnew mode %06o\n", qa, qb, gitMode(na), gitMode(nb))
	default:
		fmt.Fprintf(w, "diff --git %s %s\n", qa, qb)
	}
	return qa, qb, true
}

// binaryLine is git's line for a binary pair; a missing side is /dev/null.
func binaryLine(qa, qb string, na, nb Node) string {
	if !na.Exists {
		qa = "/dev/null"
	}
	if !nb.Exists {
		qb = "/dev/null"
	}
	return fmt.Sprintf("Binary files %s and %s differ\n", qa, qb)
}

// isBinary is git's test: a NUL byte in the first 8000 bytes.
func isBinary(b []byte) bool {
	if len(b) > 8000 {
		b = b[:8000]
	}
	return bytes.IndexByte(b, 0) >= 0
}

// maxRenamePairs bounds the similarity comparisons of one diff: beyond it
// only renames that kept their content exactly are found.
const maxRenamePairs = 2500

// renames pairs the regular files deleted between a and b with those added
// (new path -> old path): the same content first, then the most similar,
// half or more alike.
func (d *differ) renames(files []string) (map[string]string, error) {
	var deleted, added []string
	for _, p := range files {
		na, _ := d.stat(p, d.a)
		nb, _ := d.stat(p, d.b)
		switch {
		case big(na) || big(nb):
			// Never read whole: a big file shows as deleted and added.
		case na.Exists && na.Kind == record.KindFile && !na.Skipped && !nb.Exists:
			deleted = append(deleted, p)
		case nb.Exists && nb.Kind == record.KindFile && !nb.Skipped && !na.Exists:
			added = append(added, p)
		}
	}
	out := map[string]string{}
	if len(deleted) == 0 || len(added) == 0 {
		return out, nil
	}
	read := func(p string, t record.Seq) ([]byte, error) {
		n, _ := d.stat(p, t)
		return d.content(p, t, n)
	}
	old := map[string][]byte{}
	for _, p := range deleted {
		c, err := read(p, d.a)
		if err != nil {
			return nil, err
		}
		old[p] = c
	}
	taken := map[string]bool{}
	fresh := map[string][]byte{}
	for _, p := range added {
		c, err := read(p, d.b)
		if err != nil {
			return nil, err
		}
		fresh[p] = c
		for _, q := range deleted {
			if !taken[q] && bytes.Equal(old[q], c) {
				out[p], taken[q] = q, true
				break
			}
		}
	}
	if len(deleted)*len(added) > maxRenamePairs {
		return out, nil
	}
	for _, p := range added {
		if _, ok := out[p]; ok {
			continue
		}
		best, score := "", 49
		for _, q := range deleted {
			if taken[q] {
				continue
			}
			if s := similarity(old[q], fresh[p]); s > score {
				best, score = q, s
			}
		}
		if best != "" {
			out[p], taken[best] = best, true
		}
	}
	return out, nil
}

// similarity is how alike two texts are, 0 to 100: the bytes of the lines
// they have in common over their mean size (binary content: equal or not).
func similarity(a, b []byte) int {
	if bytes.Equal(a, b) {
		return 100
	}
	if len(a)+len(b) == 0 || isBinary(a) || isBinary(b) {
		return 0
	}
	count := map[string]int{}
	for l := range strings.Lines(string(a)) {
		count[l]++
	}
	common := 0
	for l := range strings.Lines(string(b)) {
		if count[l] > 0 {
			count[l]--
			common += len(l)
		}
	}
	return 2 * common * 100 / (len(a) + len(b))
}

// rename is the diff of a file moved from old (at a) to p (at b).
func (d *differ) rename(old, p string) (string, error) {
	na, _ := d.stat(old, d.a)
	nb, _ := d.stat(p, d.b)
	ca, err := d.content(old, d.a, na)
	if err != nil {
		return "", err
	}
	cb, err := d.content(p, d.b, nb)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	// Names quoted as pair quotes them: no name can forge a line.
	qa, qb := quote.Name("a/"+old), quote.Name("b/"+p)
	fmt.Fprintf(&out, "diff --git %s %s\n", qa, qb)
	if gitMode(na) != gitMode(nb) {
		fmt.Fprintf(&out, "old mode %06o\nnew mode %06o\n", gitMode(na), gitMode(nb))
	}
	fmt.Fprintf(&out, "similarity index %d%%\nrename from %s\nrename to %s\n", similarity(ca, cb), quote.Name(old), quote.Name(p))
	switch {
	case bytes.Equal(ca, cb):
	case isBinary(ca) || isBinary(cb):
		fmt.Fprintf(&out, "Binary files %s and %s differ\n", qa, qb)
	default:
		sa, sb := string(ca), string(cb)
		body, err := udiff.ToUnified(fmt.Sprintf("%s\t(%s)", qa, Label(d.a)), fmt.Sprintf("%s\t(%s)", qb, Label(d.b)), sa, udiff.Lines(sa, sb), udiff.DefaultContextLines)
		if err != nil {
			return "", fmt.Errorf("diff %s: %w", quote.Name(p), err)
		}
		out.WriteString(body)
	}
	return out.String(), nil
}

// CountLines reads a git-style diff's added and removed lines, and whether
// it is of binary content: what diff --stat and the timeline show.
func CountLines(text string) (added, removed int, binary bool) {
	body := false
	for line := range strings.Lines(text) {
		switch {
		case strings.HasPrefix(line, "@@"):
			body = true
		case !body && strings.HasPrefix(line, "Binary files "):
			binary = true
		case body && strings.HasPrefix(line, "+"):
			added++
		case body && strings.HasPrefix(line, "-"):
			removed++
		}
	}
	return added, removed, binary
}
