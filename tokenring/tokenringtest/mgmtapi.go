package tokenringtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
	"k8s.io/utils/clock"
)

// Paths of the Management API for Apache Cassandra
// (k8ssandra/management-api-for-apache-cassandra) that MgmtServer serves.
const (
	// MgmtCleanupPath starts a keyspace cleanup as a job and answers its
	// ID (resources/v1/KeyspaceOpsResources.java, "cleanup_v1").
	MgmtCleanupPath = "/api/v1/ops/keyspace/cleanup"
	// MgmtJobPath reports a job's status
	// (resources/K8OperatorResources.java, getJobStatus).
	MgmtJobPath = "/api/v0/ops/executor/job"
	// MgmtKeyspacesPath lists the keyspaces
	// (resources/KeyspaceOpsResources.java, listKeyspaces).
	MgmtKeyspacesPath = "/api/v0/ops/keyspace"
	// MgmtReplicationPath reports a keyspace's replication
	// (resources/KeyspaceOpsResources.java, getReplication).
	MgmtReplicationPath = "/api/v0/ops/keyspace/replication"
)

// Job statuses of the Management API (util/Job.java, JobStatus).
const (
	MgmtJobWaiting   = "WAITING"
	MgmtJobCompleted = "COMPLETED"
	MgmtJobError     = "ERROR"
)

// MgmtServerOptions configure NewMgmtServer; the zero value finishes every
// job before its first status read.
type MgmtServerOptions struct {
	// JobPolls is how many status reads a job answers WAITING before it
	// ends: a job that takes time, without the fake ever sleeping.
	JobPolls int
	// Clock stamps submit_time and end_time; nil is the real clock.
	Clock clock.PassiveClock
}

// MgmtRequest records one request the MgmtServer received.
type MgmtRequest struct {
	Method      string
	Path        string
	Query       string
	ContentType string
	Accept      string
	Body        string
}

// MgmtJob is the state of one job of the MgmtServer.
type MgmtJob struct {
	ID       string
	Keyspace string
	Status   string // MgmtJobWaiting, MgmtJobCompleted or MgmtJobError
	Error    string
	// Polls counts the status reads of the job so far.
	Polls int
}

// MgmtServer is a fake Management API for Apache Cassandra serving a
// Cluster as node c.Local sees it, with the paths, JSON shapes, content
// types and status codes of k8ssandra's management-api-server: keyspace
// listing and replication, the asynchronous keyspace cleanup (HTTP 202 and
// a job ID as text/plain) and the job executor's status map (every value
// a string; 404 with {} for a job it does not know). Jobs take JobPolls
// status reads to finish, fail as FailCleanup says, and vanish with
// ForgetJobs, as they do when Cassandra restarts (the agent keeps them in
// memory) or when more than 1000 later jobs push them out of its cache
// (util/JobExecutor.java).
//
// Cassandra has no tablets: keyspaces marked Tablets are not listed. It
// listens on 127.0.0.1 only; all methods are safe for concurrent use.
type MgmtServer struct {
	// URL is the base URL to give the client.
	URL string

	srv      *httptest.Server
	clock    clock.PassiveClock
	jobPolls int

	mu       sync.Mutex
	cluster  Cluster
	jobs     map[string]*mgmtJob
	jobOrder []string
	cleaned  []string
	failures map[string]string // keyspace → the job's error
	requests []MgmtRequest

	canned cannedReplies
}

// NewMgmtServer starts a fake Management API on 127.0.0.1 for node c.Local
// of c. It keeps a copy of c.
func NewMgmtServer(c Cluster, opts MgmtServerOptions) *MgmtServer {
	s := &MgmtServer{
		clock:    opts.Clock,
		jobPolls: max(opts.JobPolls, 0),
		cluster:  c.Clone(),
		jobs:     map[string]*mgmtJob{},
		failures: map[string]string{},
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close shuts the server down.
func (s *MgmtServer) Close() { s.srv.Close() }

// SetCluster replaces the cluster the node sees (a dropped keyspace). It
// keeps a copy of c.
func (s *MgmtServer) SetCluster(c Cluster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cluster = c.Clone()
}

// DropKeyspace removes a keyspace, as DROP KEYSPACE would: a job running
// for it fails when it ends.
func (s *MgmtServer) DropKeyspace(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cluster.Keyspaces = slices.DeleteFunc(slices.Clone(s.cluster.Keyspaces), func(k Keyspace) bool { return k.Name == name })
}

// FailCleanup makes every later cleanup job of keyspace end in ERROR with
// message as its "error"; an empty message removes the failure.
func (s *MgmtServer) FailCleanup(keyspace, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if message == "" {
		delete(s.failures, keyspace)
		return
	}
	s.failures[keyspace] = message
}

// ForgetJobs drops every job, finished or not, as a Cassandra restart
// does: their IDs answer 404 from then on.
func (s *MgmtServer) ForgetJobs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobs = map[string]*mgmtJob{}
	s.jobOrder = nil
}

// Cleaned returns the keyspaces whose cleanup job completed, in order.
func (s *MgmtServer) Cleaned() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cleaned)
}

// Jobs returns the jobs the server knows, in submission order.
func (s *MgmtServer) Jobs() []MgmtJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]MgmtJob, 0, len(s.jobOrder))
	for _, id := range s.jobOrder {
		out = append(out, s.jobs[id].MgmtJob)
	}
	return out
}

// Override answers method and path (without query) with status and the raw
// body, whatever the cluster says: for truncated, oversized or otherwise
// broken replies. Status 0 removes the override.
func (s *MgmtServer) Override(method, path string, status int, body string) {
	s.canned.set(method, path, status, body)
}

// Requests returns the requests received so far, in order.
func (s *MgmtServer) Requests() []MgmtRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *MgmtServer) serve(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(http.MaxBytesReader(w, r.Body, 1<<20))
	s.mu.Lock()
	s.requests = append(s.requests, MgmtRequest{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		ContentType: r.Header.Get("Content-Type"), Accept: r.Header.Get("Accept"), Body: body.String(),
	})
	s.mu.Unlock()
	if s.canned.write(w, r) {
		return
	}

	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	switch path := r.URL.Path; {
	case post && path == MgmtCleanupPath:
		s.serveCleanup(w, r, body.Bytes())
	case get && path == MgmtJobPath:
		s.serveJob(w, r)
	case get && path == MgmtKeyspacesPath:
		s.serveKeyspaces(w, r)
	case get && path == MgmtReplicationPath:
		s.serveReplication(w, r)
	case path == MgmtCleanupPath || path == MgmtJobPath || path == MgmtKeyspacesPath || path == MgmtReplicationPath:
		mgmtText(w, http.StatusMethodNotAllowed, "")
	default:
		mgmtText(w, http.StatusNotFound, "")
	}
}

// serveCleanup is KeyspaceOpsResources.cleanup of the v1 API: a JSON
// KeyspaceRequest in ({"keyspace_name", "tables", "jobs"}), HTTP 202 with
// the job ID as text/plain out; HTTP 200 "OK" without a job for system and
// system_schema; a blank name means every non-local keyspace.
func (s *MgmtServer) serveCleanup(w http.ResponseWriter, r *http.Request, body []byte) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		mgmtText(w, http.StatusUnsupportedMediaType, "")
		return
	}
	if !accepts(r.Header.Get("Accept"), "text/plain") {
		mgmtText(w, http.StatusNotAcceptable, "")
		return
	}
	var req struct {
		Jobs         int      `json:"jobs"`
		KeyspaceName string   `json:"keyspace_name"`
		Tables       []string `json:"tables"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		mgmtText(w, http.StatusBadRequest, "Unable to process JSON")
		return
	}
	name := strings.TrimSpace(req.KeyspaceName)
	if strings.EqualFold(name, "system") || strings.EqualFold(name, "system_schema") {
		mgmtText(w, http.StatusOK, "OK")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	targets := []string{req.KeyspaceName}
	if name == "" {
		targets = s.cluster.CleanupKeyspaces()
	}
	id := uuid.NewString()
	job := &mgmtJob{MgmtJob: MgmtJob{ID: id, Keyspace: strings.Join(targets, ","), Status: MgmtJobWaiting},
		targets: targets, submitted: s.clock.Now().UnixMilli()}
	s.jobs[id] = job
	s.jobOrder = append(s.jobOrder, id)
	if s.jobPolls == 0 {
		s.finish(job)
	}
	mgmtText(w, http.StatusAccepted, id)
}

// serveJob is K8OperatorResources.getJobStatus: a map of strings, 404 with
// an empty map for a job the executor does not know.
func (s *MgmtServer) serveJob(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("job_id")
	s.mu.Lock()
	defer s.mu.Unlock()
	job, ok := s.jobs[id]
	if !ok {
		mgmtJSON(w, http.StatusNotFound, map[string]string{})
		return
	}
	job.Polls++
	if job.Status == MgmtJobWaiting && job.Polls > s.jobPolls {
		s.finish(job)
	}
	reply := map[string]string{
		"id":          job.ID,
		"type":        "CLEANUP",
		"status":      job.Status,
		"submit_time": strconv.FormatInt(job.submitted, 10),
		"end_time":    strconv.FormatInt(job.ended, 10),
	}
	if job.Status == MgmtJobError {
		reply["error"] = job.Error
	}
	mgmtJSON(w, http.StatusOK, reply)
}

// finish ends a job: cleaned, or failed for a keyspace that is gone or set
// to fail. It runs the keyspaces one after another and stops at the first
// failure, as NodeOpsProvider.forceKeyspaceCleanup's loop does.
func (s *MgmtServer) finish(job *mgmtJob) {
	job.Status = MgmtJobCompleted
	for _, ks := range job.targets {
		switch msg, failing := s.failures[ks]; {
		case !s.cluster.hasKeyspace(ks):
			// The fake's own wording; clients must not parse it.
			job.Status, job.Error = MgmtJobError, fmt.Sprintf("java.lang.IllegalArgumentException: Keyspace %s does not exist", ks)
		case failing:
			job.Status, job.Error = MgmtJobError, msg
		default:
			s.cleaned = append(s.cleaned, ks)
			continue
		}
		break
	}
	job.ended = s.clock.Now().UnixMilli()
}

// serveKeyspaces is KeyspaceOpsResources.list: every keyspace, local ones
// included, filtered to the one named by keyspaceName if given.
func (s *MgmtServer) serveKeyspaces(w http.ResponseWriter, r *http.Request) {
	only := r.URL.Query().Get("keyspaceName")
	s.mu.Lock()
	defer s.mu.Unlock()
	names := []string{}
	for _, ks := range s.cluster.Keyspaces {
		if ks.Tablets || (only != "" && ks.Name != only) {
			continue
		}
		names = append(names, ks.Name)
	}
	mgmtJSON(w, http.StatusOK, names)
}

// serveReplication is KeyspaceOpsResources.getReplication: the replication
// map of system_schema.keyspaces, or 404 with its text.
func (s *MgmtServer) serveReplication(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("keyspaceName")
	if strings.TrimSpace(name) == "" {
		mgmtText(w, http.StatusBadRequest, "Get keyspace replication failed. Non-empty 'keyspaceName' must be provided")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.cluster.Keyspaces, func(k Keyspace) bool { return k.Name == name && !k.Tablets })
	if i < 0 {
		mgmtText(w, http.StatusNotFound, fmt.Sprintf("Get keyspace replication failed. Keyspace '%s' does not exist.", name))
		return
	}
	if s.cluster.Keyspaces[i].Local {
		mgmtJSON(w, http.StatusOK, map[string]string{"class": "org.apache.cassandra.locator.LocalStrategy"})
		return
	}
	repl := map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy"}
	for _, n := range s.cluster.Nodes {
		if n.Datacenter != "" {
			repl[n.Datacenter] = "3"
		}
	}
	if len(repl) == 1 {
		repl = map[string]string{"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "3"}
	}
	mgmtJSON(w, http.StatusOK, repl)
}

// accepts reports whether an Accept header admits the media type.
func accepts(header, mediaType string) bool {
	if strings.TrimSpace(header) == "" {
		return true
	}
	for _, part := range strings.Split(header, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && (mt == mediaType || mt == "*/*" || mt == strings.SplitN(mediaType, "/", 2)[0]+"/*") {
			return true
		}
	}
	return false
}

func mgmtText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(text))
}

func mgmtJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// mgmtJob is a job with what the executor keeps beside its status: the
// keyspaces it cleans and its times in milliseconds (end 0 until it ends,
// as util/Job.java's finishedTime).
type mgmtJob struct {
	MgmtJob
	targets          []string
	submitted, ended int64
}
