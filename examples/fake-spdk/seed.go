package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"

	"github.com/caretaker-storage/caretaker/examples/internal/cli"
	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
	"github.com/caretaker-storage/caretaker/spdk/spdktest"
)

// Seed is what the fake holds when it starts: the -seed file, and the
// built-in scenarios in scenarios/*.json. Unknown fields are an error.
type Seed struct {
	Lvstores []SeedLvstore `json:"lvstores"`
	// Controllers are attached before the RAID bdevs, so that a RAID bdev
	// can be built on a controller's bdev "<name>n1".
	Controllers []SeedController `json:"controllers,omitempty"`
	Raids       []SeedRaid       `json:"raids"`
	// Subsystems are created last: a namespace may expose any lvol
	// (by "<lvstore>/<lvol>") or RAID bdev.
	Subsystems []SeedSubsystem `json:"subsystems,omitempty"`
}

// SeedController is an NVMe bdev controller attached to a remote target,
// as a Longhorn engine attaches a remote replica: named after the
// replica, with subnqn "nqn.2023-01.io.longhorn.spdk:<replica>". Its
// namespace's bdev is "<name>n1".
type SeedController struct {
	Name    string `json:"name"`
	Traddr  string `json:"traddr"`
	Trsvcid string `json:"trsvcid"`
	Subnqn  string `json:"subnqn"`
}

// SeedSubsystem is an NVMe-oF subsystem exposing the named bdevs, one
// namespace each, listening on Listen ("ip:port") over TCP when given.
type SeedSubsystem struct {
	NQN        string   `json:"nqn"`
	Namespaces []string `json:"namespaces,omitempty"`
	Listen     string   `json:"listen,omitempty"`
}

// SeedLvstore is an lvstore and its lvols.
type SeedLvstore struct {
	Name  string     `json:"name"`
	Lvols []SeedLvol `json:"lvols"`
}

// SeedLvol is one lvol. Parent names the snapshot (in the same lvstore)
// it is a clone of; an lvol that another names as its parent is a
// snapshot, and its clones are those that name it, in file order. A
// snapshot chain s1 <- s2 <- head is s1 (no parent), s2 (parent s1),
// head (parent s2), as Longhorn builds a replica.
type SeedLvol struct {
	Name   string `json:"name"`
	Parent string `json:"parent,omitempty"`
}

// SeedRaid is a RAID1 bdev (a v2 engine) over the named base bdevs.
type SeedRaid struct {
	Name string   `json:"name"`
	Base []string `json:"base"`
}

//go:embed scenarios/*.json
var scenarioFiles embed.FS

// scenarioNames lists the built-in scenarios.
func scenarioNames() []string {
	entries, _ := fs.ReadDir(scenarioFiles, "scenarios")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	return names
}

func scenario(name string) (*Seed, error) {
	data, err := scenarioFiles.ReadFile("scenarios/" + name + ".json")
	if err != nil {
		return nil, cli.Usagef("-scenario: unknown scenario %q; the scenarios are %s", name, strings.Join(scenarioNames(), ", "))
	}
	s, err := parseSeed(data)
	if err != nil {
		return nil, fmt.Errorf("-scenario %s: %w", name, err)
	}
	return s, nil
}

// maxSeedSize bounds the -seed file: a node's worth of objects is a few
// KiB.
const maxSeedSize = 16 << 20

func readSeed(path string) (*Seed, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("-seed: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxSeedSize {
		return nil, fmt.Errorf("-seed %s: not a regular file of at most %d bytes", path, maxSeedSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-seed: %w", err)
	}
	s, err := parseSeed(data)
	if err != nil {
		return nil, fmt.Errorf("-seed %s: %w", path, err)
	}
	return s, nil
}

// parseSeed decodes and checks a seed: names present and unique, parents
// that exist, no cycles, snapshots with clones.
func parseSeed(data []byte) (*Seed, error) {
	var s Seed
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	stores := map[string]bool{}
	for i, lvs := range s.Lvstores {
		if lvs.Name == "" {
			return nil, fmt.Errorf("lvstores[%d] has no name", i)
		}
		if stores[lvs.Name] {
			return nil, fmt.Errorf("lvstore %s is given twice", lvs.Name)
		}
		stores[lvs.Name] = true
		if err := checkTree(lvs); err != nil {
			return nil, err
		}
	}
	ctrls := map[string]bool{}
	for i, c := range s.Controllers {
		if c.Name == "" || c.Traddr == "" || c.Subnqn == "" {
			return nil, fmt.Errorf("controllers[%d] needs a name, a traddr and a subnqn", i)
		}
		if ctrls[c.Name] {
			return nil, fmt.Errorf("controller %s is given twice", c.Name)
		}
		ctrls[c.Name] = true
	}
	nqns := map[string]bool{}
	for i, ss := range s.Subsystems {
		if ss.NQN == "" {
			return nil, fmt.Errorf("subsystems[%d] has no nqn", i)
		}
		if nqns[ss.NQN] {
			return nil, fmt.Errorf("subsystem %s is given twice", ss.NQN)
		}
		nqns[ss.NQN] = true
		if ss.Listen != "" {
			if _, _, err := net.SplitHostPort(ss.Listen); err != nil {
				return nil, fmt.Errorf("subsystem %s: listen: %w", ss.NQN, err)
			}
		}
	}
	raids := map[string]bool{}
	for i, r := range s.Raids {
		if r.Name == "" {
			return nil, fmt.Errorf("raids[%d] has no name", i)
		}
		if raids[r.Name] {
			return nil, fmt.Errorf("raid %s is given twice", r.Name)
		}
		raids[r.Name] = true
	}
	return &s, nil
}

func checkTree(lvs SeedLvstore) error {
	parent := map[string]string{}
	for i, l := range lvs.Lvols {
		if l.Name == "" {
			return fmt.Errorf("lvstore %s: lvols[%d] has no name", lvs.Name, i)
		}
		if _, dup := parent[l.Name]; dup {
			return fmt.Errorf("lvstore %s: lvol %s is given twice", lvs.Name, l.Name)
		}
		parent[l.Name] = l.Parent
	}
	for _, l := range lvs.Lvols {
		seen := map[string]bool{l.Name: true}
		for p := l.Parent; p != ""; p = parent[p] {
			if _, ok := parent[p]; !ok {
				return fmt.Errorf("lvstore %s: lvol %s: parent %s is not an lvol of this lvstore", lvs.Name, l.Name, p)
			}
			if seen[p] {
				return fmt.Errorf("lvstore %s: lvol %s: its parents form a cycle through %s", lvs.Name, l.Name, p)
			}
			seen[p] = true
		}
	}
	return nil
}

// apply builds the seed in srv. SPDK makes a snapshot out of an lvol
// (the snapshot takes the lvol's place, the lvol becomes its clone), so
// each snapshot is made from a "carrier": the lvol reached by following
// first clones down to a leaf.
func (s *Seed) apply(srv *spdktest.Server) error {
	for _, lvs := range s.Lvstores {
		if _, err := srv.AddLvstore(lvs.Name); err != nil {
			return err
		}
		clones := map[string][]string{}
		for _, l := range lvs.Lvols {
			if l.Parent != "" {
				clones[l.Parent] = append(clones[l.Parent], l.Name)
			}
		}
		for _, l := range lvs.Lvols {
			if l.Parent == "" {
				if err := build(srv, lvs.Name, l.Name, "", clones); err != nil {
					return err
				}
			}
		}
	}
	for _, c := range s.Controllers {
		trid := spdkrpc.NvmeTransportID{Trtype: "TCP", Adrfam: "IPv4", Traddr: c.Traddr, Trsvcid: c.Trsvcid, Subnqn: c.Subnqn}
		if _, err := srv.AttachController(c.Name, trid); err != nil {
			return err
		}
	}
	for _, r := range s.Raids {
		if _, err := srv.AddRaid(r.Name, r.Base...); err != nil {
			return err
		}
	}
	for _, ss := range s.Subsystems {
		if err := srv.AddSubsystem(ss.NQN, spdktest.SubsystemOptions{AllowAnyHost: true}); err != nil {
			return err
		}
		for _, b := range ss.Namespaces {
			if _, err := srv.AddNamespace(ss.NQN, b); err != nil {
				return fmt.Errorf("subsystem %s: %w", ss.NQN, err)
			}
		}
		if ss.Listen != "" {
			host, port, _ := net.SplitHostPort(ss.Listen)
			if err := srv.AddListener(ss.NQN, spdkrpc.NvmfListenAddress{Trtype: "tcp", Adrfam: "ipv4", Traddr: host, Trsvcid: port}); err != nil {
				return fmt.Errorf("subsystem %s: %w", ss.NQN, err)
			}
		}
	}
	return nil
}

// build creates lvol name, and what hangs below it, as a clone of parent
// (or with no parent).
func build(srv *spdktest.Server, lvs, name, parent string, clones map[string][]string) error {
	path := []string{name} // name, its first clone, that one's first clone...
	for len(clones[path[len(path)-1]]) > 0 {
		path = append(path, clones[path[len(path)-1]][0])
	}
	carrier := path[len(path)-1]
	var err error
	if parent == "" {
		_, err = srv.AddLvol(lvs, carrier)
	} else {
		_, err = srv.Clone(lvs, parent, carrier)
	}
	if err != nil {
		return err
	}
	snapshots := path[:len(path)-1]
	for _, snap := range snapshots {
		if _, err := srv.Snapshot(lvs, carrier, snap); err != nil {
			return err
		}
	}
	for _, snap := range snapshots {
		for _, c := range clones[snap][1:] {
			if err := build(srv, lvs, c, snap, clones); err != nil {
				return err
			}
		}
	}
	return nil
}
