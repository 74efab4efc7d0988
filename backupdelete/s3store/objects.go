package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/caretaker-storage/caretaker/backupdelete"
	"github.com/caretaker-storage/caretaker/backupdelete/internal/lhformat"
	"github.com/caretaker-storage/caretaker/internal/bounded"
)

// This file is the object layer: keys, listing, reading, writing and
// deleting, each through call (timeout, retries, counting).

// key is the object key of a path relative to the backupstore's root, as
// Longhorn's updatePath forms it (longhorn/backupstore s3/s3.go:
// filepath.Join of the target's path and the file's path, which drops a
// trailing slash). Paths here never end in a slash.
func (s *Store) key(rel string) string {
	if s.target.Prefix == "" {
		return rel
	}
	return path.Join(s.target.Prefix, rel)
}

// dirKey is the listing prefix of a directory: its key and a slash, as
// Longhorn's List adds one ("Directory must end in "/" in S3, otherwise it
// may match unintentionally", s3/s3_service.go ListObjects).
func (s *Store) dirKey(rel string) string { return s.key(rel) + "/" }

// listed is one object of a listing: its key relative to the listed
// prefix, and its Last-Modified.
type listed struct {
	name     string
	modified time.Time
}

// list lists the objects directly under the directory rel (with the
// delimiter "/": subdirectories come back as dirs) or, with recursive,
// every object under it. Each page is one request; f is called per page,
// so a listing of millions of blocks never sits in memory. An answer
// that is not S3's (a key outside the prefix, a truncated page with no
// token, a token that does not advance, more keys than asked for) is
// ErrMalformed.
func (s *Store) list(ctx context.Context, rel string, recursive bool, f func(objs []listed, dirs []string) error) error {
	_, err := s.listFrom(ctx, rel, "", recursive, s.opts.ListPageSize, f)
	return err
}

// listPrefix lists the objects directly under the directory rel whose
// names start with name (a listing of one key when name is a whole
// name).
func (s *Store) listPrefix(ctx context.Context, rel, name string, f func(objs []listed)) error {
	_, err := s.listFrom(ctx, rel, name, false, s.opts.ListPageSize, func(objs []listed, _ []string) error {
		f(objs)
		return nil
	})
	return err
}

// listFrom lists the keys starting with rel's directory prefix and then
// start, pageSize keys a request; names come back relative to the
// directory. fullEnd reports that the last page held exactly pageSize
// entries and was marked complete: an honest server's answer when the
// listing happens to end there, and also what a gateway or cache that
// cuts listings at the page size and drops the continuation answers (see
// backupNames).
func (s *Store) listFrom(ctx context.Context, rel, start string, recursive bool, pageSize int, f func(objs []listed, dirs []string) error) (fullEnd bool, err error) {
	prefix := s.dirKey(rel)
	in := &s3.ListObjectsV2Input{
		Bucket:  aws.String(s.target.Bucket),
		Prefix:  aws.String(prefix + start),
		MaxKeys: aws.Int32(int32(pageSize)),
	}
	if !recursive {
		in.Delimiter = aws.String("/")
	}
	// The tokens seen, by digest: a page is bounded, its token is not
	// kept whole.
	seen := map[[sha256.Size]byte]bool{}
	for pages := 1; ; pages++ {
		var out *s3.ListObjectsV2Output
		err := s.call(ctx, "ListObjectsV2", prefix, func(ctx context.Context) error {
			var err error
			out, err = s.client.ListObjectsV2(ctx, in)
			return err
		})
		if err != nil {
			return false, err
		}
		malformed := func(why string) error {
			return &RequestError{Op: "ListObjectsV2", Key: prefix, Status: 200, Class: ErrMalformed,
				msg: why, extra: []error{backupdelete.ErrCorrupt}}
		}
		if aws.ToString(out.Name) != s.target.Bucket {
			// Every S3 listing names its bucket (ListBucketResult's Name);
			// an answer that does not is not a listing of ours.
			return false, malformed("the answer is not a listing of the bucket")
		}
		entries := len(out.Contents) + len(out.CommonPrefixes)
		if entries > pageSize {
			return false, malformed(fmt.Sprintf("a page of %d entries, more than the %d asked for", entries, pageSize))
		}
		objs := make([]listed, 0, len(out.Contents))
		for _, o := range out.Contents {
			k := aws.ToString(o.Key)
			if !strings.HasPrefix(k, prefix+start) {
				return false, malformed(fmt.Sprintf("key %q outside the prefix", k))
			}
			objs = append(objs, listed{name: k[len(prefix):], modified: aws.ToTime(o.LastModified)})
		}
		dirs := make([]string, 0, len(out.CommonPrefixes))
		for _, p := range out.CommonPrefixes {
			k := aws.ToString(p.Prefix)
			if !strings.HasPrefix(k, prefix+start) || !strings.HasSuffix(k, "/") || len(k) == len(prefix)+1 {
				return false, malformed(fmt.Sprintf("common prefix %q not a directory under the prefix", k))
			}
			dirs = append(dirs, strings.TrimSuffix(k[len(prefix):], "/"))
		}
		if err := f(objs, dirs); err != nil {
			return false, err
		}
		if !aws.ToBool(out.IsTruncated) {
			return entries == pageSize, nil
		}
		tok := aws.ToString(out.NextContinuationToken)
		sum := sha256.Sum256([]byte(tok))
		if tok == "" || seen[sum] {
			return false, malformed("a truncated listing whose continuation token is missing or repeats")
		}
		if pages >= s.opts.MaxListPages {
			return false, &RequestError{Op: "ListObjectsV2", Key: prefix, Status: 200, Class: ErrTooLarge,
				msg: fmt.Sprintf("the listing goes on past %d pages (Options.MaxListPages)", s.opts.MaxListPages), extra: []error{backupdelete.ErrCorrupt}}
		}
		seen[sum] = true
		in.ContinuationToken = aws.String(tok)
	}
}

// endsAt proves that the listing of the directory rel, whose last object
// was last (relative to rel), ends there: one ListObjectsV2 of the keys
// after it (StartAfter) must find no object. An object there is
// ErrListingInconsistent; an answer that is not a listing of the keys
// after last (a server that ignores StartAfter answers the first keys
// again) is ErrMalformed, as is a page of entries that holds no object
// and says more follow: neither proves anything.
func (s *Store) endsAt(ctx context.Context, volume, rel, last string) error {
	prefix := s.dirKey(rel)
	in := &s3.ListObjectsV2Input{
		Bucket:     aws.String(s.target.Bucket),
		Prefix:     aws.String(prefix),
		StartAfter: aws.String(prefix + last),
		Delimiter:  aws.String("/"),
		MaxKeys:    aws.Int32(int32(s.opts.ListPageSize)),
	}
	var out *s3.ListObjectsV2Output
	err := s.call(ctx, "ListObjectsV2", prefix, func(ctx context.Context) error {
		var err error
		out, err = s.client.ListObjectsV2(ctx, in)
		return err
	})
	if err != nil {
		return err
	}
	malformed := func(why string) error {
		return &RequestError{Op: "ListObjectsV2", Key: prefix, Status: 200, Class: ErrMalformed,
			msg: why, extra: []error{backupdelete.ErrCorrupt}}
	}
	if aws.ToString(out.Name) != s.target.Bucket {
		return malformed("the answer is not a listing of the bucket")
	}
	if len(out.Contents) > 0 {
		k := aws.ToString(out.Contents[0].Key)
		if !strings.HasPrefix(k, prefix) || k <= prefix+last {
			return malformed(fmt.Sprintf("key %q is not after %q: the server does not list from StartAfter", k, prefix+last))
		}
		return lhformat.ListingCut(volume, last, k[len(prefix):])
	}
	if aws.ToBool(out.IsTruncated) {
		return malformed(fmt.Sprintf("a listing of the keys after %q with no object, marked truncated", prefix+last))
	}
	return nil
}

// get reads the object at rel, at most limit bytes (more is ErrTooLarge
// and backupdelete.ErrCorrupt). A missing object is an error wrapping
// backupdelete.ErrNotFound. An object shorter than its Content-Length (the
// connection dropped) is retried, then ErrUnavailable.
func (s *Store) get(ctx context.Context, rel string, limit int64) ([]byte, time.Time, error) {
	key := s.key(rel)
	var data []byte
	var modified time.Time
	err := s.call(ctx, "GetObject", key, func(ctx context.Context) error {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.target.Bucket), Key: aws.String(key)})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if n := aws.ToInt64(out.ContentLength); n > limit {
			return &bounded.TooLargeError{What: key, Limit: limit}
		}
		var buf bytes.Buffer
		if n := aws.ToInt64(out.ContentLength); n > 0 {
			buf.Grow(int(n))
		}
		if _, err := io.Copy(&buf, io.LimitReader(out.Body, limit+1)); err != nil {
			return err
		}
		if int64(buf.Len()) > limit {
			return &bounded.TooLargeError{What: key, Limit: limit}
		}
		if out.ContentLength != nil && int64(buf.Len()) != *out.ContentLength {
			return io.ErrUnexpectedEOF
		}
		data, modified = buf.Bytes(), aws.ToTime(out.LastModified)
		return nil
	})
	return data, modified, err
}

// exists reports whether the object at rel is there, by its key
// (HeadObject), not through a listing. A 404 is false: the callers have
// read another object of the bucket under the same lock, so the bucket is
// there and the 404 is the object's.
func (s *Store) exists(ctx context.Context, rel string) (bool, error) {
	key := s.key(rel)
	err := s.call(ctx, "HeadObject", key, func(ctx context.Context) error {
		_, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.target.Bucket), Key: aws.String(key)})
		return err
	})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, backupdelete.ErrNotFound):
		return false, nil
	default:
		return false, err
	}
}

// put writes the object at rel in one PutObject request, as Longhorn's
// Write does for cfgs and blocks (s3/s3.go Write,
// PutObjectAsSinglePart). A PutObject replaces the object whole: a reader
// sees the old content or the new one, never half, which is what the
// temporary name and rename give on a filesystem.
func (s *Store) put(ctx context.Context, rel string, data []byte) error {
	key := s.key(rel)
	return s.call(ctx, "PutObject", key, func(ctx context.Context) error {
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(s.target.Bucket), Key: aws.String(key),
			Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		})
		return err
	})
}

// del deletes one object; a missing one is success (S3 answers 204).
func (s *Store) del(ctx context.Context, rel string) error {
	key := s.key(rel)
	err := s.call(ctx, "DeleteObject", key, func(ctx context.Context) error {
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.target.Bucket), Key: aws.String(key)})
		return err
	})
	if errors.Is(err, backupdelete.ErrNotFound) {
		return nil
	}
	return err
}

// delMany deletes the objects at rels: DeleteObjects in batches of up to
// MaxDeleteBatch keys, each key's own error checked; where the server
// does not implement it (Google Cloud Storage's XML API answers
// NotImplemented: longhorn/longhorn#1594), bounded parallel single
// deletes, remembered for the Store's life. It stops at the first batch
// that fails as a whole and once ctx ends. removed counts the keys
// deleted (or already gone); failed names those that were not.
func (s *Store) delMany(ctx context.Context, rels []string) (removed int, failed []string, err error) {
	for len(rels) > 0 {
		if err := ctx.Err(); err != nil {
			return removed, failed, err
		}
		n := min(len(rels), MaxDeleteBatch)
		batch := rels[:n]
		if s.noMultiDelete.Load() {
			r, f, err := s.delSingles(ctx, batch)
			removed, failed = removed+r, append(failed, f...)
			if err != nil {
				return removed, failed, err
			}
			rels = rels[n:]
			continue
		}
		r, f, err := s.delBatch(ctx, batch)
		if errors.Is(err, ErrNotImplemented) {
			s.noMultiDelete.Store(true)
			continue // the same batch, one object at a time
		}
		removed, failed = removed+r, append(failed, f...)
		if err != nil {
			return removed, failed, err
		}
		rels = rels[n:]
	}
	return removed, failed, nil
}

// delBatch is one DeleteObjects request (quiet: the answer lists only the
// keys that failed). A key whose error is NoSuchKey is gone, which is
// success.
func (s *Store) delBatch(ctx context.Context, rels []string) (removed int, failed []string, err error) {
	objs := make([]types.ObjectIdentifier, len(rels))
	byKey := make(map[string]string, len(rels))
	for i, r := range rels {
		k := s.key(r)
		objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
		byKey[k] = r
	}
	var out *s3.DeleteObjectsOutput
	err = s.call(ctx, "DeleteObjects", s.key(path.Dir(rels[0]))+"/", func(ctx context.Context) error {
		var err error
		out, err = s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(s.target.Bucket),
			Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
		})
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	bad := map[string]bool{}
	for _, e := range out.Errors {
		k := aws.ToString(e.Key)
		r, ours := byKey[k]
		if !ours {
			return 0, nil, &RequestError{Op: "DeleteObjects", Key: k, Status: 200, Class: ErrMalformed,
				msg: "an error for a key we did not ask to delete", extra: []error{backupdelete.ErrCorrupt}}
		}
		if aws.ToString(e.Code) == "NoSuchKey" {
			continue
		}
		if !bad[r] {
			bad[r] = true
			failed = append(failed, r+": "+s.redact(aws.ToString(e.Code)+" "+aws.ToString(e.Message)))
		}
	}
	return len(rels) - len(bad), failed, nil
}

// delSingles deletes rels one request each, DeleteConcurrency at a time.
func (s *Store) delSingles(ctx context.Context, rels []string) (removed int, failed []string, err error) {
	var mu sync.Mutex
	var firstErr error
	jobs := make(chan string)
	var wg sync.WaitGroup
	for range min(s.opts.DeleteConcurrency, len(rels)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				err := s.del(ctx, r)
				mu.Lock()
				switch {
				case err == nil:
					removed++
				case ctx.Err() != nil:
					if firstErr == nil {
						firstErr = ctx.Err()
					}
				default:
					failed = append(failed, r+": "+err.Error())
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, r := range rels {
		select {
		case jobs <- r:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return removed, failed, firstErr
}
