package orphan_test

// referenceDecide is the specification of Decide: every rule restated one
// record at a time, with linear searches and no helper shared with the
// planner, so that a mistake in the planner's indexing or in the order of
// its rules cannot hide in the reference too. It spells every word the
// plan carries (keep reasons, forget messages, refusals, conditions with
// their messages, new records whole), so that a status never says one
// thing while the plan did another. decide_diff_test.go holds Decide to
// it.

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/caretaker-storage/caretaker/orphan"
)

type referencePlan struct {
	// actions is each record's fate: create, forget:<reason>, purge,
	// purge:auto or keep.
	actions map[string]string
	// keeps are the kept records' reasons, forgets the forgotten ones'
	// messages.
	keeps, forgets map[string]string
	// marks are the conditions planned on kept records, each spelled
	// "Type=Status:Reason:Message", sorted.
	marks map[string][]string
	// refused is each refusal's "Rule|Reason".
	refused map[string]string
	requeue time.Time
	// purged is the candidate (item and merged verdict) each purge is of.
	purged map[string]string
	// created are the new records, their Conditions left out, and
	// createdMarks their conditions spelled as marks.
	created      map[string]orphan.Record
	createdMarks map[string][]string
	// rejected the candidates that could not be named, in input order,
	// each with its error.
	rejected []string
	// ledger is the plan's AutoPurges, each printed, in order.
	ledger []string
}

// spellCondition is a condition as marks spell it.
func spellCondition(c metav1.Condition) string {
	return c.Type + "=" + string(c.Status) + ":" + c.Reason + ":" + c.Message
}

// refStatus is a scope's resolved health and message.
type refStatus struct {
	health orphan.Health
	msg    string
}

// referenceDecide restates Decide's rules one record at a time, with linear
// searches and no shared helpers.
func referenceDecide(in orphan.Input) referencePlan {
	out := referencePlan{actions: map[string]string{}, keeps: map[string]string{}, forgets: map[string]string{},
		marks: map[string][]string{}, refused: map[string]string{},
		purged: map[string]string{}, created: map[string]orphan.Record{}, createdMarks: map[string][]string{}}
	find := func(s orphan.Scope) (refStatus, bool) {
		for sc, st := range in.Scopes {
			if sc == s {
				if st.Health == "" {
					return refStatus{orphan.HealthUnknown, st.Message}, true
				}
				return refStatus{st.Health, st.Message}, true
			}
		}
		return refStatus{}, false
	}
	holds := func(h orphan.Health) bool { return h == orphan.HealthNodeUnavailable || h == orphan.HealthDiskInvalid }
	forgets := func(h orphan.Health) bool { return h != orphan.HealthReady && h != orphan.HealthUnknown && !holds(h) }
	scopeStr := func(s orphan.Scope) string {
		if s.Disk == "" {
			return s.NodeID
		}
		return s.NodeID + "/" + s.Disk
	}
	// lookup ranks what applies: a forgetting node, a forgetting disk, a
	// missing disk, a node that is not Ready, then the disk itself.
	lookup := func(s orphan.Scope) (refStatus, bool) {
		node, nodeOK := find(orphan.Scope{NodeID: s.NodeID})
		if s.Disk == "" {
			return node, nodeOK
		}
		disk, diskOK := find(s)
		switch {
		case nodeOK && forgets(node.health):
			return node, true
		case diskOK && forgets(disk.health):
			return disk, true
		case !diskOK && !nodeOK:
			return refStatus{}, false
		case !diskOK && node.health == orphan.HealthReady:
			return refStatus{orphan.HealthDiskRemoved, "disk " + s.Disk + " is no longer part of node " + s.NodeID}, true
		case holds(node.health):
			return node, true
		case !diskOK:
			return node, true // Unknown: neither Ready, nor forgets, nor holds
		case !nodeOK:
			return refStatus{orphan.HealthUnknown, "the health of node " + s.NodeID + " was not given: a disk is Ready only under a Ready node"}, true
		case node.health != orphan.HealthReady:
			return node, true
		}
		return disk, true
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
			out.rejected = append(out.rejected, fmt.Sprint(c.Item)+": "+err.Error())
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
	// verdictFor folds the verdicts of every candidate named name, in
	// input order: two kinds, or two outcomes, make it undecided, saying
	// which; agreeing observations give the last one's verdict.
	verdictFor := func(name string) (orphan.Verdict, bool) {
		found := false
		var v orphan.Verdict
		var kind orphan.Kind
		for i, c := range in.Candidates {
			if n := candName[i]; n == "" || n != name || !takesPart[i] {
				continue
			}
			switch {
			case !found:
				v = c.Verdict
			case kind != c.Item.Kind:
				v = orphan.Verdict{Outcome: orphan.OutcomeUndecided, Reason: "one name observed as two kinds: " + string(kind) + " and " + string(c.Item.Kind)}
			case v.Outcome != c.Verdict.Outcome:
				v = orphan.Verdict{Outcome: orphan.OutcomeUndecided, Reason: "conflicting verdicts for one item: " + v.Outcome.String() + " and " + c.Verdict.Outcome.String()}
			default:
				v = c.Verdict
			}
			kind, found = c.Item.Kind, true
		}
		return v, found
	}
	// autoDeletes says whether the policy deletes a kind's orphans: the
	// kinds it lists, and failed backups when it says so.
	autoDeletes := func(k orphan.Kind) bool {
		for _, l := range in.Policy.Kinds {
			if l == k {
				return true
			}
		}
		return k == orphan.KindBackup && in.Policy.FailedBackups
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
		if v, _ := verdictFor(n); v.Outcome == orphan.OutcomeOrphan {
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
		return max(owned, 0), none // a negative count is none
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
	// what names a level in the guard's messages.
	what := func(k gk) string {
		g := string(k.g.Kind)
		if k.g.DataEngine != "" {
			g += "/" + string(k.g.DataEngine)
		}
		if k.s.Disk == allDisks {
			return "the " + g + " items of node " + k.s.NodeID + " (all disks)"
		}
		return "the " + g + " items of " + scopeStr(k.s)
	}
	// guardRule is the guard's stop of an item's group in its scope, the
	// rule and its message; "" when none.
	guardRule := func(it orphan.Item) (string, string) {
		k := keyOfItem(it)
		if in.EvidenceRequired {
			groups := in.Scopes[k.s].Groups
			_, stated := groups[k.g]
			_, ofKind := groups[orphan.Group{Kind: k.g.Kind}]
			if !stated && !(ofKind && k.g.DataEngine != "") {
				return "NoEvidence", "the host judged " + what(k) + " itself and stated no evidence for it (its owned items and whether any was expected): without it a list of orphans cannot be told from a broken view"
			}
		}
		if _, none := evidence(k); none && validOf(k) > 0 && !in.Guard.AllowNoneExpected {
			return "NoneExpected", fmt.Sprintf("nothing is expected of %s while it holds %d valid items: the host's view looks broken (a replica list from the wrong namespace?)", what(k), validOf(k))
		}
		for _, l := range levelsOf(k) {
			if orphansOf(l) == validOf(l) && orphansOf(l) >= minItems && !in.Guard.AllowWholeScope {
				return "WholeScope", fmt.Sprintf("all %d valid items of %s are judged orphans: the host's view looks broken (a lost cache?)", validOf(l), what(l))
			}
		}
		return "", ""
	}
	// reasons joins a copy's reasons, cut at 2048 bytes on a rune.
	reasons := func(rs []string) string {
		s := strings.Join(rs, "; ")
		if len(s) > 2048 {
			cut := 2048
			for cut > 0 && !utf8.RuneStart(s[cut]) {
				cut--
			}
			s = s[:cut] + "... (cut)"
		}
		return s
	}
	// holdsWhat says what a covered copy holds, for a refusal.
	holdsWhat := func(c *orphan.Copy) string {
		switch {
		case c == nil:
			return "nobody inspected the copy, so it may hold the volume's data"
		case c.Recoverable:
			return "the copy holds data the tool can export"
		case len(c.Reasons) == 0:
			return "the copy holds data the tool cannot export today"
		}
		return "the copy holds data the tool cannot export today: " + reasons(c.Reasons)
	}
	// lastCopy restates the last-copy guard: the rule and its message;
	// lastCopyOf is its rule for one volume.
	dataName := regexp.MustCompile(`^(.+)-[a-zA-Z0-9]{8}$`)
	var lastCopyOf func(r orphan.Record, cp *orphan.Copy, vol string) (string, string)
	lastCopy := func(r orphan.Record) (string, string) {
		if in.Guard.AllowLastCopy {
			return "", ""
		}
		l, _ := last(r.Name)
		// The volumes the copy may be of: the inspection's and the
		// directory's, a refusal for either standing.
		var vols []string
		if l.Item.Copy != nil && l.Item.Copy.NoData {
			return "", ""
		}
		if l.Item.Copy != nil {
			vols = append(vols, l.Item.Copy.Volume) // "" if it could not tell
		}
		if r.Kind == orphan.KindReplicaData {
			named := ""
			if m := dataName.FindStringSubmatch(r.Parameters[orphan.ParamDataName]); m != nil {
				named = m[1]
			}
			if len(vols) == 0 || named != "" && !slices.Contains(vols, named) {
				vols = append(vols, named)
			}
		}
		for _, vol := range vols {
			if rule, msg := lastCopyOf(r, l.Item.Copy, vol); rule != "" {
				return rule, msg
			}
		}
		return "", ""
	}
	lastCopyOf = func(r orphan.Record, cp *orphan.Copy, vol string) (string, string) {
		state := "unknown"
		if st, ok := in.Volumes[vol]; ok && vol != "" {
			state = string(st)
		} else if vol != "" && in.VolumesComplete {
			state = "deleted"
		}
		auto := !r.DeletionRequested
		holds := holdsWhat(cp)
		switch {
		case state == "healthy" || state == "deleted":
			return "", ""
		case state == "faulted" && (auto || !in.LastCopyOverride[r.Name]):
			return "LastCopy", "it holds data of volume " + vol + ", which is faulted: it may be the last copy of the volume's data; only a person's override (the Orphan label " +
				orphan.LabelLastCopyOverride + "=" + orphan.LabelValueLastCopyOverride + " where the host reads it, or the host's LastCopyOverride) lets a requested deletion through; " + holds
		case state == "faulted":
			return "", ""
		case state == "degraded" && auto:
			return "VolumeDegraded", "it holds data of volume " + vol + ", which is degraded: it may be reused as a replica, so automatic deletion waits until the volume is healthy; " + holds
		case state != "degraded" && auto:
			name := vol
			if name == "" {
				name = "(not known)"
			}
			return "VolumeUnknown", "it holds data of volume " + name + ", whose state the host did not give: automatic deletion waits until the volume is known healthy or deleted; " + holds
		}
		return "", ""
	}
	// recoverable is the Recoverable condition a copy calls for on r.
	recoverable := func(r orphan.Record, c *orphan.Copy) metav1.Condition {
		st := in.Volumes[c.Volume]
		cond := metav1.Condition{Type: "Recoverable"}
		msg := ""
		if c.Volume != "" {
			msg = "volume " + c.Volume + ": "
		}
		reuse := false
		switch {
		case c.NoData:
			cond.Status, cond.Reason = "False", "NoData"
			msg += "holds none of the volume's data, as its inspection proved: the last-copy guard does not keep it"
		case !c.Recoverable:
			cond.Status, cond.Reason = "False", "NotRecoverable"
			msg += "holds data the tool cannot export today"
			if len(c.Reasons) > 0 {
				msg += ": " + reasons(c.Reasons)
			}
			msg += "; its data is still on the disk: the last-copy guard keeps it while its volume is faulted, degraded or unknown"
		case c.Volume != "" && (st == orphan.VolumeDegraded || st == orphan.VolumeFaulted):
			cond.Status, cond.Reason = "True", "Reusable"
			reuse = true
		default:
			cond.Status, cond.Reason = "True", "Recoverable"
		}
		if c.Recoverable && !c.NoData {
			msg += "a recoverable copy, "
			if c.Revision > 0 {
				msg += "revision counter " + strconv.FormatInt(c.Revision, 10)
			} else {
				msg += "no revision counter"
			}
			if c.Rank > 0 {
				msg += ", rank " + strconv.Itoa(c.Rank) + " among the copies of the volume seen (1 is the best)"
			}
		}
		if reuse {
			msg += "; volume " + c.Volume + " is " + string(st) + ": to re-adopt this copy as a failed replica:"
			for _, f := range [][2]string{{"dataDirectoryName", r.Parameters[orphan.ParamDataName]}, {"diskPath", r.Parameters[orphan.ParamDiskPath]}, {"head", c.Head}} {
				if f[1] != "" {
					msg += " " + f[0] + "=" + f[1]
				}
			}
			if c.Size > 0 {
				msg += " size=" + strconv.FormatInt(c.Size, 10)
			}
			msg += " revisionCounter=" + strconv.FormatInt(c.Revision, 10)
		}
		cond.Message = msg
		return cond
	}
	// needed are the conditions a record kept in a Ready scope (or a new
	// one) lacks; rule and ruleMsg are the guard's stop of it, if any.
	needed := func(r orphan.Record, rule, ruleMsg string, cp *orphan.Copy) []string {
		var parts []string
		if c := condOf(r, "DataCleanable"); c == nil || c.Status != "True" {
			parts = append(parts, "DataCleanable=True:Ready:the record's node and disk are ready")
		}
		if c := condOf(r, "Error"); c == nil || c.Status != "False" && !(c.Status == "True" && r.DeletionRequested) {
			parts = append(parts, "Error=False:NoError:no purge of this record has failed since it was last planned")
		}
		if r.Kind == orphan.KindEngineInstance || r.Kind == orphan.KindReplicaInstance {
			if c := condOf(r, "InstanceExist"); c == nil || c.Status != "True" {
				parts = append(parts, "InstanceExist=True:Observed:the runtime instance was observed on its node")
			}
		}
		pg := condOf(r, "PurgeGuarded")
		switch {
		case rule != "" && (pg == nil || pg.Status != "True" || pg.Reason != rule || pg.Message != ruleMsg):
			parts = append(parts, "PurgeGuarded=True:"+rule+":"+ruleMsg)
		case rule != "":
		case pg != nil && pg.Status == "True":
			parts = append(parts, "PurgeGuarded=False:Clear:the mass-deletion guard no longer covers this record's scope")
		}
		// The inspection's verdict, from the observation kept, unless the
		// record carries it already.
		if cp != nil {
			want := recoverable(r, cp)
			if c := condOf(r, "Recoverable"); c == nil || c.Status != want.Status || c.Reason != want.Reason || c.Message != want.Message {
				parts = append(parts, spellCondition(want))
			}
		}
		sort.Strings(parts)
		return parts
	}
	copyOfLast := func(name string) *orphan.Copy {
		l, _ := last(name)
		return l.Item.Copy
	}
	mark := func(r orphan.Record, rule, ruleMsg string) {
		if parts := needed(r, rule, ruleMsg, copyOfLast(r.Name)); len(parts) > 0 {
			out.marks[r.Name] = parts
		}
	}
	keep := func(r orphan.Record, why string) {
		out.actions[r.Name] = "keep"
		out.keeps[r.Name] = why
	}
	forget := func(r orphan.Record, reason, msg string) {
		out.actions[r.Name] = "forget:" + reason
		out.forgets[r.Name] = msg
	}
	refuse := func(r orphan.Record, rule, msg string) {
		keep(r, "purge refused: "+rule+": "+msg)
		out.refused[r.Name] = rule + "|" + rule + ": " + msg
		mark(r, rule, msg)
	}

	// requestKept keeps a requested record whose deletion cannot go on:
	// refused with rule, and Error=True:PurgeRefused with msg in place of
	// any other Error mark, unless the record says exactly that already.
	requestKept := func(r orphan.Record, rule, msg string) {
		keep(r, msg)
		out.refused[r.Name] = rule + "|" + msg
		if c := condOf(r, "Error"); c != nil && c.Status == "True" && c.Reason == "PurgeRefused" && c.Message == msg {
			return
		}
		var parts []string
		for _, p := range out.marks[r.Name] {
			if !strings.HasPrefix(p, "Error=") {
				parts = append(parts, p)
			}
		}
		parts = append(parts, "Error=True:PurgeRefused:"+msg)
		sort.Strings(parts)
		out.marks[r.Name] = parts
	}

	recorded := map[string]bool{}
	var purges []orphan.Record
	for _, r := range in.Records {
		st, ok := lookup(r.Scope())
		if !ok {
			continue
		}
		h, scope := st.health, scopeStr(r.Scope())
		recorded[r.Name] = true
		if _, known := orphan.Spec(r.Kind); !known {
			keep(r, "orphan type "+strconv.Quote(string(r.Kind))+" is not one caretaker handles: left to its owner")
			continue
		}
		holders := 0
		for _, o := range in.Records {
			if o.Name == r.Name {
				holders++
			}
		}
		if holders > 1 {
			// One name is one object in a store: which one it is cannot
			// be told, so nothing is done to any of them.
			keep(r, "several records share the name "+r.Name+": the input's records are inconsistent (a store holds one object of a name), so none of them is purged or forgotten")
			if _, done := out.refused[r.Name]; r.DeletionRequested && !done {
				out.refused[r.Name] = "DuplicateName|deletion requested, but several records of the input share the name " + r.Name + ": none of them is purged until one remains"
			}
			continue
		}
		if forgets(h) {
			forget(r, string(h), st.msg)
			continue
		}
		cl := condOf(r, "DataCleanable")
		markFalse := func(reason, msg string) {
			if cl == nil || cl.Status != "False" || cl.Reason != reason {
				out.marks[r.Name] = []string{"DataCleanable=False:" + reason + ":" + msg}
			}
		}
		dismiss := func() {
			if r.DeletionRequested {
				why := "dismissed: deletion requested, but the data of a dismissed orphan is never purged"
				keep(r, why)
				out.refused[r.Name] = "Dismissed|" + why
			} else {
				keep(r, "dismissed: its data is kept")
			}
			markFalse("Dismissed", "a user dismissed this orphan: its data is never purged")
		}
		if h != orphan.HealthReady && r.Dismissed {
			dismiss()
			continue
		}
		if holds(h) {
			if r.DeletionRequested {
				forget(r, string(h), "deletion requested while "+scope+" is "+string(h)+": the record goes, the data stays: "+st.msg)
			} else {
				keep(r, "scope "+scope+" is "+string(h)+": kept, not cleanable until it is Ready: "+st.msg)
				markFalse(string(h), st.msg)
			}
			continue
		}
		if h != orphan.HealthReady {
			switch c := condOf(r, "DataCleanable"); {
			case r.DeletionRequested && c != nil && c.Status == "False":
				forget(r, "NotCleanable", "deletion requested, but the record says its data is not cleanable")
			case r.DeletionRequested:
				// A requested deletion never sits silently (issue 32.6).
				requestKept(r, "ScopeUnknown", "deletion requested, but scope "+scope+" was not scanned completely: "+st.msg)
			default:
				keep(r, "scope "+scope+" was not scanned completely: "+st.msg)
			}
			continue
		}
		if n, err := r.Item().Name(); err != nil || n != r.Name {
			forget(r, "Mismatch", "the record's name does not match its parameters, or they name no valid item")
			continue
		}
		v, seen := verdictFor(r.Name)
		rule, ruleMsg := guardRule(r.Item())
		switch {
		case !seen:
			forget(r, "Gone", "no longer seen in "+scope)
			continue
		case v.Outcome == orphan.OutcomeOwned:
			forget(r, "Owned", v.Reason)
			continue
		case r.Dismissed:
			dismiss()
			continue
		case v.Outcome != orphan.OutcomeOrphan && r.DeletionRequested:
			// A requested deletion never sits silently (issue 32.6).
			mark(r, rule, ruleMsg)
			requestKept(r, "Undecided", "deletion requested, but its item is undecided: "+v.Reason)
			continue
		case v.Outcome != orphan.OutcomeOrphan:
			keep(r, "undecided: "+v.Reason)
			mark(r, rule, ruleMsg)
			continue
		}
		auto := autoDeletes(r.Kind)
		due := r.CreatedAt.Add(in.Policy.GracePeriod)
		ageless := auto && r.CreatedAt.IsZero()
		isDue := r.DeletionRequested || (auto && !ageless && !in.Now.Before(due))
		heldMark := cl != nil && cl.Status == "False" && (holds(orphan.Health(cl.Reason)) || cl.Reason == "Dismissed")
		switch {
		case !isDue && ageless:
			keep(r, "auto-deletion waits: the record has no creation time, so its grace period cannot be counted")
			mark(r, rule, ruleMsg)
		case !isDue && auto:
			earliest(due)
			keep(r, "auto-deletion due at "+due.UTC().Format(time.RFC3339))
			mark(r, rule, ruleMsg)
		case !isDue:
			keep(r, "orphan; waiting for a deletion request")
			mark(r, rule, ruleMsg)
		case cl != nil && cl.Status == "False" && !r.DeletionRequested && heldMark:
			earliest(in.Now)
			keep(r, "purge due once DataCleanable=True is recorded again")
			mark(r, rule, ruleMsg)
		case cl != nil && cl.Status == "False" && r.DeletionRequested:
			forget(r, "NotCleanable", "deletion requested, but the record says its data is not cleanable")
		case cl != nil && cl.Status == "False":
			forget(r, "NotCleanable", "auto-deletion due, but the record says its data is not cleanable")
		case cl == nil || cl.Status != "True":
			earliest(in.Now)
			keep(r, "purge due once DataCleanable=True is recorded")
			mark(r, rule, ruleMsg)
		case rule != "":
			refuse(r, rule, ruleMsg)
		default:
			if l, _ := last(r.Name); l.Item.Scope() != r.Scope() {
				// An observation of another scope purges nothing here.
				forget(r, "Gone", "no longer seen in "+scope+"; its name was seen in "+scopeStr(l.Item.Scope()))
				continue
			}
			if rule, msg := lastCopy(r); rule != "" {
				refuse(r, rule, msg)
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
	pct := int(math.Round(100 * share))
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
		rule, msg := "", ""
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
				rule, msg = "AutoShare", fmt.Sprintf("%d of the %d valid items of %s are due for purging at once, more than %d%%: automatic deletion stops here",
					inScope, validOf(l), what(l), pct)
			}
		}
		if rule == "" && !r.DeletionRequested && !inLedger(k)[r.Name] {
			if since := in.AutoPurgesSince; !in.Guard.AllowOverBudget && !since.IsZero() && in.Now.Before(since.Add(window)) {
				// The ledger is known only since then: the allowance
				// counts as spent.
				rule, msg = "Budget", fmt.Sprintf("the ledger of automatic purges is known only since %s (a restart whose store keeps no ledger), so the budget of %s within %s counts as spent: automatic deletion resumes at %s, or on a person's request",
					since.UTC().Format(time.RFC3339), what(k), window, since.Add(window).UTC().Format(time.RFC3339))
			}
			for _, l := range levelsOf(k) {
				allowance := max(minItems-1, int(math.Floor(share*float64(validOf(l)))))
				if used := len(inLedger(l)) + spent[l]; rule == "" && !in.Guard.AllowOverBudget && used >= allowance {
					rule, msg = "Budget", fmt.Sprintf("%d automatic purges of %s within %s reach its budget of %d (%d%% of its %d valid items): automatic deletion resumes when the window passes, or on a person's request",
						used, what(l), window, allowance, pct, validOf(l))
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
			refuse(r, rule, msg)
			continue
		}
		if r.DeletionRequested {
			out.actions[r.Name] = "purge"
		} else {
			out.actions[r.Name] = "purge:auto"
		}
		l, _ := last(r.Name)
		v, _ := verdictFor(r.Name)
		out.purged[r.Name] = fmt.Sprint(orphan.Candidate{Item: l.Item, Verdict: v})
	}
	for _, c := range in.Candidates {
		n, err := c.Item.Name()
		if err != nil || recorded[n] {
			continue
		}
		if v, _ := verdictFor(n); v.Outcome != orphan.OutcomeOrphan {
			continue
		}
		c, _ = last(n) // a merged name is created as its last observation
		if st, ok := lookup(c.Item.Scope()); !ok || st.health != orphan.HealthReady {
			continue
		}
		it := c.Item
		labels := map[string]string{"longhorn.io/component": "orphan", "longhorn.io/managed-by": "longhorn-manager",
			"longhorn.io/orphan-type": string(it.Kind), "longhornnode": it.NodeID}
		switch it.Kind {
		case orphan.KindEngineInstance:
			labels["longhorninstancemanager"] = it.Parameters[orphan.ParamInstanceManager]
			labels["longhornengine"] = it.Parameters[orphan.ParamInstanceName]
		case orphan.KindReplicaInstance:
			labels["longhorninstancemanager"] = it.Parameters[orphan.ParamInstanceManager]
			labels["longhornreplica"] = it.Parameters[orphan.ParamInstanceName]
		}
		rec := orphan.Record{Name: n, Kind: it.Kind, NodeID: it.NodeID, DataEngine: it.DataEngine,
			Parameters: it.Parameters, Labels: labels, CreatedAt: in.Now}
		out.created[n] = rec
		rule, ruleMsg := guardRule(it)
		if parts := needed(rec, rule, ruleMsg, it.Copy); len(parts) > 0 {
			out.createdMarks[n] = parts
		}
		out.actions[n] = "create"
		if autoDeletes(it.Kind) {
			earliest(in.Now.Add(in.Policy.GracePeriod))
		}
	}
	return out
}
