// Package s3store is a backupstore in an S3 bucket (AWS S3 or an
// S3-compatible store) in Longhorn's object layout, with Longhorn's lock
// protocol on lock objects: point it at the bucket Longhorn backs up to,
// and it deletes backups interoperably with Longhorn's own backupstore
// module, with far fewer requests. Store implements
// backupdelete.Backupstore and backupdelete.CompletedBackupDeleter and
// passes backupstoretest.RunConformanceTests.
package s3store
