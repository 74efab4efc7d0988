// Package lhreplicatest holds what tests of Longhorn v1 replica
// directories share: the volume.meta every engine release writes, with
// what it reads as (ReleaseForms), and the structs longhorn-engine writes
// it from (EngineInfo) and longhorn-manager reads it into
// (ManagerVolumeMeta).
package lhreplicatest

import (
	"encoding/json"
	"fmt"

	"github.com/caretaker-storage/caretaker/internal/lhreplica"
)

// ReleaseForm is a volume.meta as an engine release writes it, and what
// it reads as.
type ReleaseForm struct {
	Release string
	File    string
	Want    lhreplica.VolumeMeta
}

// ReleaseForms are the volume.meta forms of every released v1 engine, as
// its replica.go writes them: encoding/json's Encoder of the release's
// Info (its exported fields in order, then a newline).
func ReleaseForms() []ReleaseForm {
	base := lhreplica.VolumeMeta{Size: 10 << 30, Head: "volume-head-003.img", Dirty: true, Parent: "volume-snap-b.img", SectorSize: 512}
	with := func(f lhreplica.MetaFormat, set func(*lhreplica.VolumeMeta)) lhreplica.VolumeMeta {
		m := base
		m.Format = f
		set(&m)
		return m
	}
	none := func(*lhreplica.VolumeMeta) {}
	return []ReleaseForm{
		{"v0.1.0", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Parent":"volume-snap-b.img","SectorSize":512}` + "\n", with(lhreplica.FormatV010, none)},
		{"v0.2.0–v1.0.2", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Parent":"volume-snap-b.img","SectorSize":512,"BackingFileName":""}` + "\n", with(lhreplica.FormatV020, none)},
		{"v0.2.0–v1.0.2 with a backing file", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Parent":"volume-snap-b.img","SectorSize":512,"BackingFileName":"centos7.qcow2"}` + "\n",
			with(lhreplica.FormatV020, func(m *lhreplica.VolumeMeta) { m.BackingFilePath = "centos7.qcow2" })},
		{"v1.1.0", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-b.img","SectorSize":512,"BackingFileName":""}` + "\n", with(lhreplica.FormatV110, none)},
		{"v1.1.0 in error", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":false,"Rebuilding":true,"Error":"stat failed","Parent":"volume-snap-b.img","SectorSize":512,"BackingFileName":""}` + "\n",
			with(lhreplica.FormatV110, func(m *lhreplica.VolumeMeta) { m.Dirty, m.Rebuilding, m.Error = false, true, "stat failed" })},
		{"v1.1.1–v1.11", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-b.img","SectorSize":512,"BackingFilePath":"/host/var/lib/longhorn/backing-images/img-0a1b2c3d/backing"}` + "\n",
			with(lhreplica.FormatV111, func(m *lhreplica.VolumeMeta) {
				m.BackingFilePath = "/host/var/lib/longhorn/backing-images/img-0a1b2c3d/backing"
			})},
		{"v1.12", `{"Size":10737418240,"Head":"volume-head-003.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"volume-snap-b.img","SectorSize":512,"BackingFilePath":"","Encrypted":true}` + "\n",
			with(lhreplica.FormatV112, func(m *lhreplica.VolumeMeta) { m.Encrypted = true })},
	}
}

// EngineMeta is a volume.meta of a volume of size bytes as engines v1.1.1
// to v1.11 write it, without its newline.
func EngineMeta(size int64) []byte {
	return fmt.Appendf(nil, `{"Size":%d,"Head":"volume-head-000.img","Dirty":true,"Rebuilding":false,"Error":"","Parent":"","SectorSize":512,"BackingFilePath":""}`, size)
}

// EngineInfo is volume.meta as longhorn-engine's Info type
// (pkg/replica/replica.go) serialises it, in the key order of v1.1.1 to
// v1.11.
type EngineInfo struct {
	Size            int64
	Head            string
	Dirty           bool
	Rebuilding      bool
	Error           string
	Parent          string
	SectorSize      int64
	BackingFilePath string
}

// ManagerVolumeMeta is longhorn-manager's util.VolumeMeta: what
// util.GetVolumeMeta unmarshals a replica directory's volume.meta into.
type ManagerVolumeMeta struct {
	EngineInfo
	BackingFile any
}

// LonghornReads is longhorn-manager's own test of a replica directory's
// volume.meta (controller/monitor/disk_monitor.go, isVolumeMetaFileExist →
// util.GetVolumeMeta): the file is json.Unmarshal'ed into util.VolumeMeta,
// and no key is required. A directory whose name ends in -<8 letters or
// digits> (util.GetPossibleReplicaDirectoryNames) that no replica expects
// and whose volume.meta passes this is an orphan to Longhorn.
func LonghornReads(data []byte) bool {
	var m ManagerVolumeMeta
	return json.Unmarshal(data, &m) == nil
}
