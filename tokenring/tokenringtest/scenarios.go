package tokenringtest

import (
	"fmt"

	"github.com/caretaker-storage/caretaker/tokenring"
)

// RackedCluster is n nodes 10.0.0.1, 10.0.0.2... of datacenter dc1, in
// racks r1, r2, r3 in turn, eight tokens each (GenerateTokens, seeded by
// the node's number, so the same on every run), seen from 10.0.0.1, with
// keyspace shop (NetworkTopologyStrategy, factor 3 in dc1) to clean and a
// local system keyspace. fake-scylla's
// scenarios six-nodes, scaled-out and nine-nodes are RackedCluster(6), (7)
// and (9).
//
// RackedCluster(9) with shop at NetworkTopologyStrategy factor 3 in dc1
// puts one replica of each range in each rack: nodes of one rack share no
// range, and every node shares ranges with nodes of the other racks, so
// cleaning all nine at once would clean replicas of one range together.
func RackedCluster(n int) Cluster {
	c := Cluster{Local: "10.0.0.1", Keyspaces: []Keyspace{
		{Name: "shop", Replication: tokenring.Replication{Strategy: tokenring.NetworkTopologyStrategy, Datacenters: map[string]int{"dc1": 3}}},
		{Name: "system", Local: true},
	}}
	for i := range n {
		c.Nodes = append(c.Nodes, Node{
			Endpoint: fmt.Sprintf("10.0.0.%d", i+1), HostID: fmt.Sprintf("host-%d", i+1),
			Datacenter: "dc1", Rack: fmt.Sprintf("r%d", i%3+1), Tokens: GenerateTokens(uint64(i+1), 8),
		})
	}
	return c
}
