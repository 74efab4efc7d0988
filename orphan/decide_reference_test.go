package orphan_test

// referenceDecide is the specification of Decide: every rule restated one
// record at a time, with linear searches and no helper shared with the
// planner, so that a mistake in the planner's indexing or in the order of
// its rules cannot hide in the reference too. decide_diff_test.go holds
// Decide to it.

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

type referencePlan struct {
	actions map[string]string
	marks   map[string]string
	refused map[string]string
	requeue time.Time
	// purged and created are the item each purge and new record is of;
	// rejected the candidates that could not be named, in input order.
	purged, created map[string]string
	rejected        []string
	// ledger is the plan's AutoPurges, each printed.
	ledger []string
}

// referenceDecide restates Decide's rules one record at a time, with linear
// searches and no shared helpers.
func referenceDecide(in orphan.Input) referencePlan {
	out := referencePlan{actions: map[string]string{}, marks: map[string]string{}, refused: map[string]string{},
		purged: map[string]string{}, created: map[string]string{}}
	find := func(s orphan.Scope) (orphan.Health, bool) {
		for sc, st := range in.Scopes {
			if sc == s {
				if st.Health == "" {
					return orphan.HealthUnknown, true
				}
				return st.Health, true
			}
		}
		return "", false
	}
	holds := func(h orphan.Health) bool { return h == orphan.HealthNodeUnavailable || h == orphan.HealthDiskInvalid }
	forgets := func(h orphan.Health) bool { return h != orphan.HealthReady && h != orphan.HealthUnknown && !holds(h) }
	// lookup ranks what applies: a forgetting node, a forgetting disk, a
	// missing disk, a node that is not Ready, then the disk itself.
	lookup := func(s orphan.Scope) (orphan.Health, bool) {
		nodeH, nodeOK := find(orphan.Scope{NodeID: s.NodeID})
		if s.Disk == "" {
			return nodeH, nodeOK
		}
		diskH, diskOK := find(s)
		switch {
		case nodeOK && forgets(nodeH):
			return nodeH, true
		case diskOK && forgets(diskH):
			return diskH, true
		case !diskOK && !nodeOK:
			return "", false
		case !diskOK && nodeH == orphan.HealthReady:
			return orphan.HealthDiskRemoved, true
		case holds(nodeH):
			return nodeH, true
		case !diskOK, !nodeOK, nodeH != orphan.HealthReady:
			return orphan.HealthUnknown, true
		}
		return diskH, true
	}
	// keyOf is an item's match key: its kind's name class and its
	// MatchParam trimmed of white space.
	keyOf := func(it orphan.Item) string {
		s, ok := orphan.Spec(it.Kind)
		if !ok {
			return "unknown:" + string(it.Kind) + "\x00"
		}
		return s.NameClass + "\x00" + strings.TrimSpace(it.Parameters[s.MatchParam])
	}
	// participates says whether Decide names a candidate: every orphan,
	// and another only when a record or an orphan candidate shares its
	// match key. (Two items whose dash-joined fields collide into one name
	// but whose match keys differ are kept apart unless both take part.)
	participates := func(c orphan.Candidate) bool {
		if c.Verdict.Outcome == orphan.OutcomeOrphan {
			return true
		}
		k := keyOf(c.Item)
		for _, r := range in.Records {
			if keyOf(r.Item()) == k {
				return true
			}
		}
		for _, o := range in.Candidates {
			if o.Verdict.Outcome == orphan.OutcomeOrphan && keyOf(o.Item) == k {
				return true
			}
		}
		return false
	}
	takesPart := make([]bool, len(in.Candidates))
	candName := make([]string, len(in.Candidates)) // "" when it cannot be named
	for i, c := range in.Candidates {
		takesPart[i] = participates(c)
		candName[i], _ = c.Item.Name()
		if _, err := c.Item.Name(); err != nil && takesPart[i] {
			out.rejected = append(out.rejected, fmt.Sprint(c.Item))
		}
	}
	// last returns the last candidate named name that takes part: the
	// observation a merged name keeps.
	last := func(name string) (orphan.Candidate, bool) {
		var found orphan.Candidate
		ok := false
		for i, c := range in.Candidates {
			if n := candName[i]; n != "" && n == name && takesPart[i] {
				found, ok = c, true
			}
		}
		return found, ok
	}
	// verdictFor returns the combined verdict of every candidate named name.
	verdictFor := func(name string) (orphan.Outcome, bool) {
		found := false
		var outcome orphan.Outcome
		var kind orphan.Kind
		for i, c := range in.Candidates {
			if n := candName[i]; n == "" || n != name || !takesPart[i] {
				continue
			}
			if !found {
				outcome, kind, found = c.Verdict.Outcome, c.Item.Kind, true
			} else if outcome != c.Verdict.Outcome || kind != c.Item.Kind {
				outcome = orphan.OutcomeUndecided
			}
		}
		return outcome, found
	}
	earliest := func(t time.Time) {
		if out.requeue.IsZero() || t.Before(out.requeue) {
			out.requeue = t
		}
	}
	condOf := func(r orphan.Record, typ string) *metav1.Condition {
		for i := range r.Conditions {
			if r.Conditions[i].Type == typ {
				return &r.Conditions[i]
			}
		}
		return nil
	}

	// The guard: count each scope's valid items and orphans by hand.
	minItems := in.Guard.MinItems
	if minItems <= 0 {
		minItems = 3
	}
	share := in.Guard.MaxAutoShare
	if share <= 0 || share >= 1 {
		share = 0.5
	}
	// Each group (kind and data engine) of a scope is counted on its own.
	type gk struct {
		s orphan.Scope
		g orphan.Group
	}
	keyOfItem := func(it orphan.Item) gk { return gk{it.Scope(), orphan.Group{Kind: it.Kind, DataEngine: it.DataEngine}} }
	valid := map[gk]int{}
	orphans := map[gk]int{}
	countedName := map[string]bool{}
	for _, c := range in.Candidates {
		if c.Verdict.Outcome != orphan.OutcomeOrphan {
			valid[keyOfItem(c.Item)]++
			continue
		}
		n, err := c.Item.Name()
		if err != nil || countedName[n] {
			continue
		}
		if outcome, _ := verdictFor(n); outcome == orphan.OutcomeOrphan {
			countedName[n] = true
			l, _ := last(n) // counted where its last observation is
			valid[keyOfItem(l.Item)]++
			orphans[keyOfItem(l.Item)]++
		}
	}
	evidence := func(k gk) (owned int, none bool) {
		st := in.Scopes[k.s]
		owned, none = st.OwnedUnlisted, st.NoneExpected
		for g, e := range st.Groups {
			if g == k.g || g.Kind == k.g.Kind && g.DataEngine == "" {
				owned, none = max(owned, e.OwnedUnlisted), none || e.NoneExpected
			}
		}
		return owned, none
	}
	// A node level is written as the key of the node's scope with the
	// disk "*": every disk of the node, summed by hand.
	const allDisks = "*"
	validOf := func(k gk) int {
		if k.s.Disk == allDisks {
			n := 0
			for o, v := range valid {
				if o.s.NodeID == k.s.NodeID && o.s.Disk != "" && o.g == k.g {
					n += v
				}
			}
			for s := range in.Scopes {
				if s.NodeID == k.s.NodeID && s.Disk != "" {
					owned, _ := evidence(gk{s, k.g})
					n += owned
				}
			}
			return n
		}
		owned, _ := evidence(k)
		return valid[k] + owned
	}
	orphansOf := func(k gk) int {
		if k.s.Disk == allDisks {
			n := 0
			for o, v := range orphans {
				if o.s.NodeID == k.s.NodeID && o.s.Disk != "" && o.g == k.g {
					n += v
				}
			}
			return n
		}
		return orphans[k]
	}
	// levelsOf are the keys a record is weighed by: its own, and its
	// node's all disks if it lies on a disk.
	levelsOf := func(k gk) []gk {
		if k.s.Disk == "" {
			return []gk{k}
		}
		return []gk{k, {orphan.Scope{NodeID: k.s.NodeID, Disk: allDisks}, k.g}}
	}
	guardRule := func(r orphan.Record) string {
		k := keyOfItem(r.Item())
		if in.EvidenceRequired {
			groups := in.Scopes[k.s].Groups
			_, stated := groups[k.g]
			_, ofKind := groups[orphan.Group{Kind: k.g.Kind}]
			if !stated && !(ofKind && k.g.DataEngine != "") {
				return "NoEvidence"
			}
		}
		if _, none := evidence(k); none && validOf(k) > 0 && !in.Guard.AllowNoneExpected {
			return "NoneExpected"
		}
		for _, l := range levelsOf(k) {
			if orphansOf(l) == validOf(l) && orphansOf(l) >= minItems && !in.Guard.AllowWholeScope {
				return "WholeScope"
			}
		}
		return ""
	}
	// lastCopy restates the last-copy guard.
	dataName := regexp.MustCompile(`^(.+)-[a-zA-Z0-9]{8}$`)
	lastCopy := func(r orphan.Record) string {
		if in.Guard.AllowLastCopy {
			return ""
		}
		l, _ := last(r.Name)
		vol := ""
		switch {
		case l.Item.Copy != nil && l.Item.Copy.NoData:
			return ""
		case l.Item.Copy != nil:
			vol = l.Item.Copy.Volume
		case r.Kind == orphan.KindReplicaData:
			if m := dataName.FindStringSubmatch(r.Parameters[orphan.ParamDataName]); m != nil {
				vol = m[1]
			}
		default:
			return ""
		}
		state := "unknown"
		if st, ok := in.Volumes[vol]; ok && vol != "" {
			state = string(st)
		} else if vol != "" && in.VolumesComplete {
			state = "deleted"
		}
		auto := !r.DeletionRequested
		switch {
		case state == "healthy" || state == "deleted":
			return ""
		case state == "faulted" && (auto || !in.LastCopyOverride[r.Name]):
			return "LastCopy"
		case state == "faulted":
			return ""
		case state == "degraded" && auto:
			return "VolumeDegraded"
		case state != "degraded" && auto:
			return "VolumeUnknown"
		}
		return ""
	}
	mark := func(r orphan.Record, rule string) {
		var parts []string
		if c := condOf(r, "DataCleanable"); c == nil || c.Status != "True" {
			parts = append(parts, "DataCleanable=True:Ready")
		}
		if c := condOf(r, "Error"); c == nil || c.Status != "False" && !(c.Status == "True" && r.DeletionRequested) {
			parts = append(parts, "Error=False:NoError")
		}
		if r.Kind == orphan.KindEngineInstance || r.Kind == orphan.KindReplicaInstance {
			if c := condOf(r, "InstanceExist"); c == nil || c.Status != "True" {
				parts = append(parts, "InstanceExist=True:Observed")
			}
		}
		pg := condOf(r, "PurgeGuarded")
		switch {
		case rule != "":
			parts = append(parts, "PurgeGuarded=True:"+rule) // random records never carry the same message
		case pg != nil && pg.Status == "True":
			parts = append(parts, "PurgeGuarded=False:Clear")
		}
		// The inspection's verdict, from the observation kept; random
		// records never carry a Recoverable condition of their own.
		if l, _ := last(r.Name); l.Item.Copy != nil {
			c := l.Item.Copy
			st := in.Volumes[c.Volume]
			switch {
			case c.NoData:
				parts = append(parts, "Recoverable=False:NoData")
			case !c.Recoverable:
				parts = append(parts, "Recoverable=False:NotRecoverable")
			case c.Volume != "" && (st == orphan.VolumeDegraded || st == orphan.VolumeFaulted):
				parts = append(parts, "Recoverable=True:Reusable")
			default:
				parts = append(parts, "Recoverable=True:Recoverable")
			}
		}
		if len(parts) > 0 {
			sort.Strings(parts)
			out.marks[r.Name] = fmt.Sprint(parts)
		}
	}

	// requestError adds Error=True:PurgeRefused to a requested record's
	// marks, in place of the ones in drop. (Random records never carry
	// its message.)
	requestError := func(r orphan.Record, drop []string) {
		var parts []string
		if m, ok := out.marks[r.Name]; ok {
			for _, p := range strings.Fields(strings.Trim(m, "[]")) {
				if !slices.Contains(drop, p) {
					parts = append(parts, p)
				}
			}
		}
		parts = append(parts, "Error=True:PurgeRefused")
		sort.Strings(parts)
		out.marks[r.Name] = fmt.Sprint(parts)
	}

	recorded := map[string]bool{}
	var purges []orphan.Record
	for _, r := range in.Records {
		h, ok := lookup(r.Scope())
		if !ok {
			continue
		}
		recorded[r.Name] = true
		if _, known := orphan.Spec(r.Kind); !known {
			out.actions[r.Name] = "keep" // another owner's kind: left as it is
			continue
		}
		if forgets(h) {
			out.actions[r.Name] = "forget:" + string(h)
			continue
		}
		cl := condOf(r, "DataCleanable")
		markFalse := func(reason string) {
			if cl == nil || cl.Status != "False" || cl.Reason != reason {
				out.marks[r.Name] = fmt.Sprint([]string{"DataCleanable=False:" + reason})
			}
		}
		dismiss := func() {
			out.actions[r.Name] = "keep"
			if r.DeletionRequested {
				out.refused[r.Name] = "Dismissed"
			}
			markFalse("Dismissed")
		}
		if h != orphan.HealthReady && r.Dismissed {
			dismiss()
			continue
		}
		if holds(h) {
			if r.DeletionRequested {
				out.actions[r.Name] = "forget:" + string(h)
			} else {
				out.actions[r.Name] = "keep"
				markFalse(string(h))
			}
			continue
		}
		if h == orphan.HealthUnknown {
			switch c := condOf(r, "DataCleanable"); {
			case r.DeletionRequested && c != nil && c.Status == "False":
				out.actions[r.Name] = "forget:NotCleanable"
			case r.DeletionRequested:
				// A requested deletion never sits silently (issue 32.6).
				out.actions[r.Name] = "keep"
				out.refused[r.Name] = "ScopeUnknown"
				requestError(r, nil)
			default:
				out.actions[r.Name] = "keep"
			}
			continue
		}
		if n, err := r.Item().Name(); err != nil || n != r.Name {
			out.actions[r.Name] = "forget:Mismatch"
			continue
		}
		outcome, seen := verdictFor(r.Name)
		switch {
		case !seen:
			out.actions[r.Name] = "forget:Gone"
			continue
		case outcome == orphan.OutcomeOwned:
			out.actions[r.Name] = "forget:Owned"
			continue
		case r.Dismissed:
			dismiss()
			continue
		case outcome == orphan.OutcomeUndecided && r.DeletionRequested:
			// A requested deletion never sits silently (issue 32.6).
			out.actions[r.Name] = "keep"
			out.refused[r.Name] = "Undecided"
			mark(r, guardRule(r))
			requestError(r, []string{"Error=False:NoError"})
			continue
		case outcome == orphan.OutcomeUndecided:
			out.actions[r.Name] = "keep"
			mark(r, guardRule(r))
			continue
		}
		auto := false
		for _, k := range in.Policy.Kinds {
			auto = auto || k == r.Kind
		}
		due := r.CreatedAt.Add(in.Policy.GracePeriod)
		isDue := r.DeletionRequested || (auto && !in.Now.Before(due))
		heldMark := cl != nil && cl.Status == "False" && (holds(orphan.Health(cl.Reason)) || cl.Reason == "Dismissed")
		switch {
		case !isDue:
			if auto {
				earliest(due)
			}
			out.actions[r.Name] = "keep"
			mark(r, guardRule(r))
		case cl != nil && cl.Status == "False" && !r.DeletionRequested && heldMark:
			earliest(in.Now)
			out.actions[r.Name] = "keep"
			mark(r, guardRule(r))
		case cl != nil && cl.Status == "False":
			out.actions[r.Name] = "forget:NotCleanable"
		case cl == nil || cl.Status != "True":
			earliest(in.Now)
			out.actions[r.Name] = "keep"
			mark(r, guardRule(r))
		case guardRule(r) != "":
			out.actions[r.Name] = "keep"
			out.refused[r.Name] = guardRule(r)
			mark(r, guardRule(r))
		default:
			if l, _ := last(r.Name); l.Item.Scope() != r.Scope() {
				out.actions[r.Name] = "forget:Gone" // an observation of another scope purges nothing here
				continue
			}
			if rule := lastCopy(r); rule != "" {
				out.actions[r.Name] = "keep"
				out.refused[r.Name] = rule
				mark(r, rule)
				continue
			}
			purges = append(purges, r)
		}
	}
	// The share and budget rules, in name order, over the ledger of the
	// window.
	sort.Slice(purges, func(i, j int) bool { return purges[i].Name < purges[j].Name })
	window := in.Guard.BudgetWindow
	if window <= 0 {
		window = time.Hour
	}
	inLedger := func(k gk) map[string]bool {
		names := map[string]bool{}
		for _, e := range in.AutoPurges {
			if !e.At.After(in.Now.Add(-window)) || e.Group != k.g {
				continue
			}
			if (gk{e.Scope, e.Group}) == k || k.s.Disk == allDisks && e.Scope.NodeID == k.s.NodeID && e.Scope.Disk != "" {
				names[e.Name] = true
			}
		}
		return names
	}
	for _, e := range in.AutoPurges {
		if e.At.After(in.Now.Add(-window)) {
			out.ledger = append(out.ledger, fmt.Sprint(e))
		}
	}
	spent := map[gk]int{}
	for _, r := range purges {
		k := keyOfItem(r.Item())
		rule := ""
		for _, l := range levelsOf(k) {
			inScope := 0
			for _, o := range purges {
				for _, ol := range levelsOf(keyOfItem(o.Item())) {
					if ol == l {
						inScope++
					}
				}
			}
			if rule == "" && !r.DeletionRequested && !in.Guard.AllowAnyShare && inScope >= minItems && float64(inScope) > share*float64(validOf(l)) {
				rule = "AutoShare"
			}
		}
		if rule == "" && !r.DeletionRequested && !inLedger(k)[r.Name] {
			if since := in.AutoPurgesSince; !in.Guard.AllowOverBudget && !since.IsZero() && in.Now.Before(since.Add(window)) {
				rule = "Budget" // the ledger is known only since then: the allowance counts as spent
			}
			for _, l := range levelsOf(k) {
				allowance := max(minItems-1, int(math.Floor(share*float64(validOf(l)))))
				if rule == "" && !in.Guard.AllowOverBudget && len(inLedger(l))+spent[l] >= allowance {
					rule = "Budget"
				}
			}
			if rule == "" {
				for _, l := range levelsOf(k) {
					spent[l]++
				}
				out.ledger = append(out.ledger, fmt.Sprint(orphan.AutoPurge{Name: r.Name, Scope: k.s, Group: k.g, At: in.Now}))
			}
		}
		if rule != "" {
			out.actions[r.Name] = "keep"
			out.refused[r.Name] = rule
			mark(r, rule)
			continue
		}
		if r.DeletionRequested {
			out.actions[r.Name] = "purge"
		} else {
			out.actions[r.Name] = "purge:auto"
		}
		l, _ := last(r.Name)
		out.purged[r.Name] = fmt.Sprint(l.Item)
	}
	for _, c := range in.Candidates {
		n, err := c.Item.Name()
		if err != nil || recorded[n] {
			continue
		}
		if outcome, _ := verdictFor(n); outcome != orphan.OutcomeOrphan {
			continue
		}
		c, _ = last(n) // a merged name is created as its last observation
		if h, ok := lookup(c.Item.Scope()); !ok || h != orphan.HealthReady {
			continue
		}
		c.Item.Copy = nil // a record carries no inspection
		out.created[n] = fmt.Sprint(c.Item)
		out.actions[n] = "create"
		for _, k := range in.Policy.Kinds {
			if k == c.Item.Kind {
				earliest(in.Now.Add(in.Policy.GracePeriod))
			}
		}
	}
	return out
}
