package mgmtapi_test

import (
	"context"
	"fmt"
	"time"

	"github.com/caretaker-storage/caretaker/tokenring"
	"github.com/caretaker-storage/caretaker/tokenring/mgmtapi"
	"github.com/caretaker-storage/caretaker/tokenring/tokenringtest"
)

// One Cassandra node cleaned through its Management API (here the fake,
// whose jobs take two status reads to finish, and fail for "metrics"):
// RunCleanup lists the keyspaces that are not LocalStrategy and cleans
// them one at a time, each counted only when its job reads COMPLETED.
func ExampleCleaner() {
	srv := tokenringtest.NewMgmtServer(tokenringtest.Cluster{
		Local: "10.0.0.1",
		Keyspaces: []tokenringtest.Keyspace{
			{Name: "system", Local: true}, {Name: "system_auth"}, {Name: "shop"}, {Name: "metrics"},
		},
	}, tokenringtest.MgmtServerOptions{JobPolls: 2})
	defer srv.Close()
	srv.FailCleanup("metrics", "java.lang.RuntimeException: Node is involved in cluster membership changes. Not safe to run cleanup.")

	// In a pod: mgmtapi.New("http://<pod IP>:8080", mgmtapi.Options{})
	c, err := mgmtapi.New(srv.URL, mgmtapi.Options{PollInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	report, err := tokenring.RunCleanup(ctx, c)
	fmt.Println("listed: ", report.Keyspaces)
	fmt.Println("cleaned:", report.Cleaned)
	fmt.Println("retry metrics:", tokenring.IsRetryable(report.Failed["metrics"]))
	fmt.Println(err != nil)
	// Output:
	// listed:  [system_auth shop metrics]
	// cleaned: [system_auth shop]
	// retry metrics: true
	// true
}
