package node

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/dgraph-io/badger/v4"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/internal/storelayout"
)

// A backup file is
//
//	magic (16 bytes) | Badger backup stream | sentinel (8 bytes, all 1s) | SHA-256 (32 bytes)
//
// where the Badger stream is DB.Backup's frames (uint64 little-endian
// length, protobuf KVList) and the SHA-256 covers the magic and the
// stream. The trailer makes a truncated or altered backup (a broken
// download, a disk error) a refusal at restore instead of a silent partial
// restore.
var backupMagic = []byte("ADPNODE-BACKUP\x00\x01")

const (
	backupSentinel = ^uint64(0)
	// maxBackupFrame bounds one Badger frame read at restore (a hostile
	// length would otherwise be one huge allocation).
	maxBackupFrame = 256 << 20
)

// ErrNotEmpty is returned by RestoreDir for a target dir with files in it.
var ErrNotEmpty = errors.New("restore target is not empty")

// Backup writes a consistent snapshot of the whole database (one Badger
// read timestamp: every record acknowledged before it started, and
// nothing half-written) to w while the node keeps serving.
func (n *Node) Backup(w io.Writer) error {
	if n.closing.Load() {
		return adp.Errorf(adp.CodeUnavailable, "node is shutting down")
	}
	n.inflight.Add(1)
	defer n.inflight.Done()
	if n.cfg.InMemory {
		return adp.Errorf(adp.CodeUnavailable, "an in-memory node has nothing durable to back up")
	}
	return writeBackup(n.db, w)
}

// BackupDir backs up the database in dir, which no node may be running on
// (ErrLocked: ask the running node instead).
func BackupDir(dir string, w io.Writer) error {
	if _, err := os.Stat(dir + "/MANIFEST"); err != nil {
		return fmt.Errorf("%s is not an adpnode data dir (no MANIFEST): %w", dir, err)
	}
	db, _, err := openStopped(dir)
	if err != nil {
		return err
	}
	defer db.Close()
	return writeBackup(db, w)
}

func writeBackup(db *badger.DB, w io.Writer) error {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
	if _, err := bw.Write(backupMagic); err != nil {
		return err
	}
	if _, err := db.Backup(bw, 0); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	trailer := binary.LittleEndian.AppendUint64(nil, backupSentinel)
	_, err := w.Write(append(trailer, h.Sum(nil)...))
	return err
}

// RestoreDir loads a backup file into dir, which must be absent or empty.
// The whole file is verified (framing, frame sizes, SHA-256 trailer)
// before anything is written.
func RestoreDir(dir string, in io.ReadSeeker) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s: %w (restore only into a new or empty dir)", dir, ErrNotEmpty)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	streamLen, err := verifyBackup(in)
	if err != nil {
		return fmt.Errorf("backup file refused: %w", err)
	}
	if _, err := in.Seek(int64(len(backupMagic)), io.SeekStart); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	db, err := openBadger(BadgerOptions(dir).WithSyncWrites(false), nil)
	if err != nil {
		return err
	}
	if err := db.Load(io.LimitReader(in, streamLen), 256); err != nil {
		db.Close()
		return fmt.Errorf("restore: %w", err)
	}
	// A restored dir is a new incarnation of the one backed up: what it
	// handed out (attention's stream IDs) must not be taken for the
	// original's, whose state went on after the backup. And the host log's
	// witnesses may have seen leaves the node logged after the backup: the
	// log holds back until they confirm (package hostlog).
	var mark [16]byte
	rand.Read(mark[:])
	if err := db.Update(func(txn *badger.Txn) error {
		if err := txn.Set([]byte(storelayout.Restored), []byte(hex.EncodeToString(mark[:]))); err != nil {
			return err
		}
		return txn.Set([]byte(storelayout.TlogFence), nil)
	}); err != nil {
		db.Close()
		return fmt.Errorf("restore: %w", err)
	}
	if err := db.Sync(); err != nil {
		db.Close()
		return err
	}
	return db.Close()
}

// verifyBackup reads a backup file once and returns the length of its
// Badger stream.
func verifyBackup(r io.Reader) (int64, error) {
	h := sha256.New()
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, backupMagic) {
		return 0, errors.New("not an adpnode backup (bad magic)")
	}
	h.Write(magic)
	var n int64
	for {
		var szb [8]byte
		if _, err := io.ReadFull(br, szb[:]); err != nil {
			return 0, fmt.Errorf("truncated at byte %d (no trailer): %v", n+int64(len(magic)), err)
		}
		sz := binary.LittleEndian.Uint64(szb[:])
		if sz == backupSentinel {
			sum := make([]byte, sha256.Size)
			if _, err := io.ReadFull(br, sum); err != nil {
				return 0, errors.New("truncated trailer")
			}
			if !bytes.Equal(sum, h.Sum(nil)) {
				return 0, errors.New("checksum mismatch: the file was altered or damaged")
			}
			if _, err := br.ReadByte(); err != io.EOF {
				return 0, errors.New("bytes after the trailer")
			}
			return n, nil
		}
		if sz > maxBackupFrame {
			return 0, fmt.Errorf("frame of %d bytes at byte %d exceeds %d", sz, n+int64(len(magic)), maxBackupFrame)
		}
		h.Write(szb[:])
		if err := copyN(h, br, int64(sz)); err != nil {
			return 0, fmt.Errorf("truncated frame at byte %d", n+int64(len(magic)))
		}
		n += 8 + int64(sz)
	}
}

func copyN(h hash.Hash, r io.Reader, n int64) error {
	_, err := io.CopyN(h, r, n)
	return err
}
