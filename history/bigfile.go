package history

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"

	"github.com/zerofs/zerofs/blobstore"
	"github.com/zerofs/zerofs/record"
)

// bigFile bounds what a diff, the log's change list and rename detection
// read into memory: a file over it (a 10 GiB sparse file another user
// made, say) is compared by its sha256, streamed, and shown as binary, as
// git treats files over core.bigFileThreshold. Without the bound, root's
// `zerofs log --stat` read such a file whole into memory to hash it.
const bigFile = 64 << 20

// big reports whether n is a file over bigFile bytes.
func big(n Node) bool { return n.Exists && n.Kind == record.KindFile && n.Bytes > bigFile }

// contentStreamer is a Source that can hand out a path's content as a
// stream (both sources can; fakes in tests need not).
type contentStreamer interface {
	withContent(path string, t record.Seq, fn func(io.Reader) error) error
}

// hashContent is the sha256 (hex) of path's content at t, never held in
// memory whole: a file is hashed by blobstore.HashFile, which reads only
// its data where the file system says where its holes are.
func hashContent(src Source, path string, t record.Seq) (string, error) {
	cs, ok := src.(contentStreamer)
	if !ok {
		b, err := src.Content(path, t)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:]), nil
	}
	var id string
	err := cs.withContent(path, t, func(r io.Reader) error {
		if f, ok := r.(*os.File); ok {
			sum, _, err := blobstore.HashFile(f)
			id = sum.String()
			return err
		}
		h := sha256.New()
		if _, err := io.Copy(h, r); err != nil {
			return err
		}
		id = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	return id, err
}
