package lhreplica

// For the external tests (releases_test.go), which use lhreplicatest and
// so cannot be in this package.
var (
	ParseMetaFast       = parseMetaFast
	CheckMetaAgainstRef = checkMetaAgainstRef
)
