package replicate

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/zerofs/zerofs/blobstore"
)

// With a replica key (--replica-key FILE) the bucket holds only
// authenticated ciphertext. From the key two subkeys are derived (HKDF-
// SHA256): one seals every object's body with XChaCha20-Poly1305 (a random
// 24-byte nonce per object, so nonces never repeat in practice), the other
// names blobs: blobs/<HMAC-SHA256(name key, sha256)>, so an object's name
// does not reveal its content's hash. The associated data of each object is
// its logical name (blobs/<hmac>, log/<first>-<last>, bases/<seq>), so one
// object cannot be passed off as another. Bodies are compressed before
// they are sealed. lease.json is plaintext and carries the key's check
// value (an HMAC of a constant), so a restore without the key, or with
// another, is refused at once and clearly.

// sealMagic begins every sealed body.
var sealMagic = []byte("zerofs-sealed-1\n")

// ErrKey: the replica's key and the one given do not agree (none given
// for an encrypted replica, one given for a plain one, or another key).
var ErrKey = errors.New("replicate: replica key mismatch")

// codec turns plaintext into object bodies and names; a nil *codec is the
// plaintext replica (bodies zstd-compressed, blobs named by their sha256).
type codec struct {
	aead    cipher.AEAD
	nameKey []byte
	check   string
}

// ReadKey reads a replica key file: 32 bytes, raw or as 64 hex digits.
func ReadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replicate: replica key: %w", err)
	}
	if len(b) == 32 {
		return b, nil
	}
	if k, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil && len(k) == 32 {
		return k, nil
	}
	return nil, fmt.Errorf("replicate: replica key %s: want 32 bytes, raw or as 64 hex digits (e.g. head -c32 /dev/urandom > %s)", path, path)
}

func newCodec(key []byte) (*codec, error) {
	if key == nil {
		return nil, nil
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("replicate: a replica key is 32 bytes, not %d", len(key))
	}
	enc, err := hkdf.Key(sha256.New, key, nil, "zerofs replica: seal", chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	name, err := hkdf.Key(sha256.New, key, nil, "zerofs replica: names", 32)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.NewX(enc)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, name)
	m.Write([]byte("zerofs replica: key check"))
	return &codec{aead: aead, nameKey: name, check: hex.EncodeToString(m.Sum(nil))}, nil
}

// keyCheck is what lease.json says of the key ("" for none).
func (c *codec) keyCheck() string {
	if c == nil {
		return ""
	}
	return c.check
}

// blobName is blob id's object name.
func (c *codec) blobName(id blobstore.ID) string {
	if c == nil {
		return blobsDir + id.String()
	}
	m := hmac.New(sha256.New, c.nameKey)
	m.Write(id[:])
	return blobsDir + hex.EncodeToString(m.Sum(nil))
}

// seal makes the body of the object whose logical name is logical.
func (c *codec) seal(logical string, plain []byte) []byte {
	z := compress(plain)
	if c == nil {
		return z
	}
	nonce := make([]byte, c.aead.NonceSize())
	randRead(nonce)
	out := append(append([]byte(nil), sealMagic...), nonce...)
	return c.aead.Seal(out, nonce, z, []byte(logical))
}

func randRead(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
}
