package seal

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"strconv"

	"golang.org/x/crypto/chacha20poly1305"
)

// Sizes on the wire (decoded bytes).
const (
	PublicKeySize = 32
	EpochKeySize  = 32
	CommitSize    = sha256.Size
	// WrapSize is one HPKE single-shot wrap of an epoch key: the 32-byte
	// encapsulated key, the 32-byte epoch key and the 16-byte tag.
	WrapSize  = 32 + EpochKeySize + 16
	NonceSize = chacha20poly1305.NonceSizeX
	TagSize   = chacha20poly1305.Overhead
)

// Domain-separation labels.
const (
	labelWrap    = "adpnode sealed room v1 epoch key"
	labelCommit  = "adpnode sealed room v1 key commitment"
	labelMessage = "adpnode sealed room v1 message"
)

// ErrOpen is returned when a wrap or a message does not open: the wrong
// key, another room, epoch or sender, or tampered bytes.
var ErrOpen = errors.New("seal: cannot open (not for this key, or tampered)")

func suite() (hpke.KEM, hpke.KDF, hpke.AEAD) {
	return hpke.DHKEM(ecdh.X25519()), hpke.HKDFSHA256(), hpke.ChaCha20Poly1305()
}

// PrivateKey is a member's X25519 key.
type PrivateKey struct{ k *ecdh.PrivateKey }

// GenerateKey makes a new X25519 key from r (crypto/rand.Reader).
func GenerateKey(r io.Reader) (*PrivateKey, error) {
	var b [32]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return nil, err
	}
	return PrivateKeyFromBytes(b[:])
}

// PrivateKeyFromBytes restores a key from its 32 bytes.
func PrivateKeyFromBytes(b []byte) (*PrivateKey, error) {
	k, err := ecdh.X25519().NewPrivateKey(b)
	if err != nil {
		return nil, err
	}
	return &PrivateKey{k}, nil
}

// Bytes is the secret; keep it in a 0600 file, never log it.
func (p *PrivateKey) Bytes() []byte { return p.k.Bytes() }

// Public is the 32-byte public key to publish in seal.key.
func (p *PrivateKey) Public() []byte { return p.k.PublicKey().Bytes() }

// String never shows the secret.
func (p *PrivateKey) String() string { return "seal.PrivateKey(redacted)" }

// ValidPublicKey reports whether b is an X25519 public key usable as an
// HPKE recipient: 32 bytes and not a low-order point (whose shared secret
// is all zeros and makes every wrap fail).
func ValidPublicKey(b []byte) bool {
	if len(b) != PublicKeySize {
		return false
	}
	pub, err := ecdh.X25519().NewPublicKey(b)
	if err != nil {
		return false
	}
	// Any fixed scalar will do: a low-order point gives the zero output,
	// which crypto/ecdh reports as an error.
	_, err = probeKey.ECDH(pub)
	return err == nil
}

var probeKey = func() *ecdh.PrivateKey {
	k, err := ecdh.X25519().NewPrivateKey([]byte("adpnode sealed room v1 key probe"))
	if err != nil {
		panic(err)
	}
	return k
}()

func wrapInfo(roomID string, epoch int64, member string) []byte {
	return []byte(labelWrap + "\x00" + roomID + "\x00" + strconv.FormatInt(epoch, 10) + "\x00" + member)
}

// Commit is the key commitment carried in seal.epoch: every member checks
// that the key it unwrapped is the one every other member got.
func Commit(roomID string, epoch int64, key []byte) []byte {
	h := sha256.New()
	h.Write([]byte(labelCommit + "\x00" + roomID + "\x00" + strconv.FormatInt(epoch, 10) + "\x00"))
	h.Write(key)
	return h.Sum(nil)
}

// WrapKey seals the epoch key for one member's public key.
func WrapKey(pub []byte, roomID string, epoch int64, member string, key []byte) ([]byte, error) {
	if !ValidPublicKey(pub) {
		return nil, errors.New("seal: unusable X25519 public key")
	}
	kem, kdf, aead := suite()
	pk, err := kem.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return hpke.Seal(pk, kdf, aead, wrapInfo(roomID, epoch, member), key)
}

// Unwrap opens a wrap made by WrapKey for this key and checks the key against
// the epoch's commitment.
func (p *PrivateKey) Unwrap(wrap []byte, roomID string, epoch int64, member string, commit []byte) ([]byte, error) {
	key, err := p.unwrap(wrap, roomID, epoch, member, commit)
	if err != nil {
		return nil, ErrOpen
	}
	return key, nil
}

// Why a wrap for a key the member holds does not give it the epoch key.
var (
	errWrapOpen   = errors.New("does not open with the sealing key it names")
	errWrapCommit = errors.New("opens to a key that does not match the epoch's commitment")
)

func (p *PrivateKey) unwrap(wrap []byte, roomID string, epoch int64, member string, commit []byte) ([]byte, error) {
	if len(wrap) != WrapSize {
		return nil, errWrapOpen
	}
	_, kdf, aead := suite()
	sk, err := hpke.NewDHKEMPrivateKey(p.k)
	if err != nil {
		return nil, errWrapOpen
	}
	key, err := hpke.Open(sk, kdf, aead, wrapInfo(roomID, epoch, member), wrap)
	if err != nil || len(key) != EpochKeySize {
		return nil, errWrapOpen
	}
	if subtle.ConstantTimeCompare(Commit(roomID, epoch, key), commit) != 1 {
		return nil, errWrapCommit
	}
	return key, nil
}

func messageAD(roomID string, epoch int64, sender string) []byte {
	return []byte(labelMessage + "\x00" + roomID + "\x00" + strconv.FormatInt(epoch, 10) + "\x00" + sender)
}

// SealBytes encrypts plaintext under an epoch key with a random nonce from
// r; the additional data binds room, epoch and sender.
func SealBytes(r io.Reader, key []byte, roomID string, epoch int64, sender string, plaintext []byte) (nonce, ciphertext []byte, err error) {
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, nil, err
	}
	nonce = make([]byte, NonceSize)
	if _, err := io.ReadFull(r, nonce); err != nil {
		return nil, nil, err
	}
	return nonce, aead.Seal(nil, nonce, plaintext, messageAD(roomID, epoch, sender)), nil
}

// OpenBytes decrypts what SealBytes made.
func OpenBytes(key []byte, roomID string, epoch int64, sender string, nonce, ciphertext []byte) ([]byte, error) {
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	if len(nonce) != NonceSize {
		return nil, ErrOpen
	}
	pt, err := aead.Open(nil, nonce, ciphertext, messageAD(roomID, epoch, sender))
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
