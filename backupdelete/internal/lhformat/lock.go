package lhformat

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// LockType is a lock's type, as Longhorn numbers them. Locks of the same
// type are compatible; locks of different types exclude each other.
type LockType int

// The lock types (longhorn/backupstore lock.go BACKUP_LOCK, RESTORE_LOCK,
// DELETION_LOCK).
const (
	LockBackup   LockType = 1
	LockRestore  LockType = 1
	LockDeletion LockType = 2
)

// Lock timing: longhorn/backupstore lock.go LOCK_DURATION,
// LOCK_REFRESH_INTERVAL, LOCK_CHECK_WAIT_TIME.
const (
	LockExpiry  = 150 * time.Second
	LockRefresh = 60 * time.Second
	LockSettle  = 2 * time.Second
)

// LockFile is the content of locks/lock-<16 hex>.lck: Longhorn's
// FileLock's exported fields, which is what its saveLock encodes.
type LockFile struct {
	Name     string
	Type     LockType
	Acquired bool
}

// MaxLockFileBytes bounds a lock file read; real ones are ~60 bytes.
const MaxLockFileBytes = 64 << 10

// ParseLockFile parses a lock file. Bad JSON, an empty or path-like name,
// or an unknown type is an error wrapping ErrCorrupt.
func ParseLockFile(data []byte) (LockFile, error) {
	if len(data) > MaxLockFileBytes {
		return LockFile{}, Corrupt("lock file", fmt.Errorf("%d bytes, more than %d", len(data), MaxLockFileBytes))
	}
	var l LockFile
	if err := json.Unmarshal(data, &l); err != nil {
		return LockFile{}, Corrupt("lock file", err)
	}
	if l.Name == "" || strings.ContainsAny(l.Name, "/\\\x00") || l.Name == "." || l.Name == ".." {
		return LockFile{}, Corrupt("lock file", fmt.Errorf("invalid name %q", l.Name))
	}
	if l.Type != LockBackup && l.Type != LockDeletion {
		return LockFile{}, Corrupt("lock file", fmt.Errorf("unknown type %d", l.Type))
	}
	return l, nil
}

// EncodeLockFile is the lock file as Longhorn's saveLock writes it.
func EncodeLockFile(l LockFile) ([]byte, error) { return json.Marshal(l) }

// SeenLock is a lock found in the locks directory, with its time: the
// file's modification time on a filesystem, the object's Last-Modified on
// S3 (Longhorn's FileTime on either driver).
type SeenLock struct {
	LockFile
	Time time.Time
}

// Expired is Longhorn's FileLock.isExpired (longhorn/backupstore
// lock.go): a lock is dead when its time is more than LockExpiry before
// now. Exactly LockExpiry old, it is still live.
func Expired(now, t time.Time) bool { return now.Sub(t) > LockExpiry }

// RanksBefore is Longhorn's compareLocks(a, b) < 0: acquired locks first,
// then older times, then smaller names.
func RanksBefore(a, b SeenLock) bool {
	if a.Acquired != b.Acquired {
		return a.Acquired
	}
	if !a.Time.Equal(b.Time) {
		return a.Time.Before(b.Time)
	}
	return a.Name < b.Name
}

// Blocker is Longhorn's FileLock.canAcquire turned around: among locks
// (which must include mine), the first-ranked lock of another type that
// has not expired at now and ranks before mine, or nil. ok is false when
// mine is not among them: the taker cannot prove its rank and must not
// proceed.
func Blocker(locks []SeenLock, me LockFile, now time.Time) (blocker *SeenLock, ok bool) {
	var mine *SeenLock
	for i := range locks {
		if locks[i].Name == me.Name {
			mine = &locks[i]
		}
	}
	if mine == nil {
		return nil, false
	}
	for i := range locks {
		l := &locks[i]
		if l.Name == me.Name || l.Type == me.Type || Expired(now, l.Time) {
			continue
		}
		if RanksBefore(*l, *mine) && (blocker == nil || RanksBefore(*l, *blocker)) {
			blocker = l
		}
	}
	return blocker, true
}

// NewLockName returns "lock-" and 16 lowercase hex digits, as Longhorn's
// util.GenerateName("lock") does.
func NewLockName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return LockPrefix + hex.EncodeToString(b[:]), nil
}

// LatestBackup finds the backup with the latest snapshot time, as
// Longhorn's getLatestBackup does (RFC 3339 SnapshotCreatedAt).
type LatestBackup struct {
	Name, At string
	t        time.Time
}

// Consider takes one backup into account; an unparsable time is an error.
func (l *LatestBackup) Consider(name, snapshotCreatedAt string) error {
	t, err := time.Parse(time.RFC3339, snapshotCreatedAt)
	if err != nil {
		return fmt.Errorf("backup %s: cannot parse SnapshotCreatedAt %q", name, snapshotCreatedAt)
	}
	if l.Name == "" || t.After(l.t) {
		l.Name, l.At, l.t = name, snapshotCreatedAt, t
	}
	return nil
}
