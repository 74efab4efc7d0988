package tokenring

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	hashA = HashTokens([]string{"1", "2"})
	hashB = HashTokens([]string{"1", "3"})
)

// annotationState is one value of an annotation, including "absent".
type annotationState struct {
	name    string
	present bool
	value   string
}

var (
	currentStates = []annotationState{
		{"absent", false, ""}, {"empty", true, ""}, {"garbage", true, "not-a-hash"}, {"hashA", true, hashA},
	}
	lastStates = []annotationState{
		{"absent", false, ""}, {"empty", true, ""}, {"garbage", true, "xyz"},
		{"NeverCleanedUp", true, NeverCleanedUp}, {"hashA", true, hashA}, {"hashB", true, hashB},
	}
)

// conditionState is one state of a status condition: absent, True, False.
type conditionState string

func statusWith(observed string, ssp, available, degraded conditionState) ClusterStatus {
	s := ClusterStatus{Generation: 7}
	switch observed {
	case "current":
		s.ObservedGeneration = ptr(int64(7))
	case "stale":
		s.ObservedGeneration = ptr(int64(6))
	}
	for typ, st := range map[string]conditionState{StatefulSetControllerProgressingCondition: ssp, AvailableCondition: available, DegradedCondition: degraded} {
		if st != "absent" {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionStatus(st)})
		}
	}
	return s
}

func ptr[T any](v T) *T { return &v }

// TestDecideEveryAnnotationAndConditionCombination enumerates 4 current ×
// 6 last-cleaned-up annotation states × 3 observed generations × 3^3
// condition states and checks each decision against the rules written out
// independently below.
func TestDecideEveryAnnotationAndConditionCombination(t *testing.T) {
	conds := []conditionState{"absent", "True", "False"}
	cases := 0
	for _, cur := range currentStates {
		for _, last := range lastStates {
			for _, observed := range []string{"nil", "stale", "current"} {
				for _, ssp := range conds {
					for _, avail := range conds {
						for _, deg := range conds {
							cases++
							m := Member{Name: "m0", Annotations: map[string]string{}}
							if cur.present {
								m.Annotations[CurrentTokenRingHashAnnotation] = cur.value
							}
							if last.present {
								m.Annotations[LastCleanedUpTokenRingHashAnnotation] = last.value
							}
							status := statusWith(observed, ssp, avail, deg)
							preconditions := observed == "current" && ssp != "True" && avail == "True" && deg == "False"

							var wantAction Action
							var wantReason, wantHash string
							switch {
							case cur.name == "absent":
								wantAction, wantReason = ActionWait, ReasonWaitingForServiceState
							case cur.name == "empty" || cur.name == "garbage":
								wantAction, wantReason = ActionWait, ReasonUnexpectedServiceState
							case last.name == "absent":
								wantAction, wantReason, wantHash = ActionSeed, ReasonSeedingLastCleanedUp, NeverCleanedUp
							case last.name == "empty" || last.name == "garbage":
								wantAction, wantReason = ActionWait, ReasonUnexpectedServiceState
							case last.value == cur.value:
								wantAction, wantReason = ActionNone, ReasonAsExpected
							case !preconditions:
								wantAction, wantReason = ActionWait, ReasonProgressing
							default:
								wantAction, wantReason, wantHash = ActionStartCleanup, ReasonTokenRingChanged, cur.value
							}

							v := Decide(m, status, DecideOptions{})
							name := fmt.Sprintf("current=%s last=%s observed=%s ssp=%s available=%s degraded=%s", cur.name, last.name, observed, ssp, avail, deg)
							if v.Action != wantAction || v.Reason != wantReason || v.TokenRingHash != wantHash || v.Member != "m0" {
								t.Errorf("%s: got %v/%s hash %q, want %v/%s hash %q", name, v.Action, v.Reason, v.TokenRingHash, wantAction, wantReason, wantHash)
							}
							if v.Action == ActionWait && v.Message == "" {
								t.Errorf("%s: a wait without a message", name)
							}
						}
					}
				}
			}
		}
	}
	if cases != 4*6*3*27 {
		t.Fatalf("enumerated %d cases", cases)
	}
}

func TestDecidePreconditionMessagesNameEveryUnmetOne(t *testing.T) {
	m := Member{Name: "m", Annotations: map[string]string{CurrentTokenRingHashAnnotation: hashA, LastCleanedUpTokenRingHashAnnotation: NeverCleanedUp}}
	v := Decide(m, statusWith("stale", "True", "False", "True"), DecideOptions{})
	if n := len(strings.Split(v.Message, "\n")); n != 3 {
		t.Fatalf("message %q has %d lines, want one per unmet precondition", v.Message, n)
	}
}

func TestDecideJobStates(t *testing.T) {
	ready := statusWith("current", "False", "True", "False")
	member := func(last string, job *CleanupJob) Member {
		return Member{Name: "m", Job: job, Annotations: map[string]string{CurrentTokenRingHashAnnotation: hashB, LastCleanedUpTokenRingHashAnnotation: last}}
	}
	for _, tc := range []struct {
		name       string
		m          Member
		wantAction Action
		wantReason string
		wantHash   string
	}{
		{"running job", member(hashA, &CleanupJob{TokenRingHash: hashB}), ActionWait, ReasonWaitingForJobCompletion, ""},
		{"completed job records its hash", member(hashA, &CleanupJob{TokenRingHash: hashB, Complete: true}), ActionRecordCleanup, ReasonJobCompleted, hashB},
		{"completed job for an older ring", member(hashA, &CleanupJob{TokenRingHash: hashA, Complete: true}), ActionStartCleanup, ReasonTokenRingChanged, hashB},
		{"completed job already recorded", member(hashB, &CleanupJob{TokenRingHash: hashB, Complete: true}), ActionNone, ReasonAsExpected, ""},
		{"completed job without hash", member(hashA, &CleanupJob{Complete: true}), ActionStartCleanup, ReasonTokenRingChanged, hashB},
		{"garbage beats a job", member("garbage", &CleanupJob{TokenRingHash: hashB, Complete: true}), ActionWait, ReasonUnexpectedServiceState, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(tc.m, ready, DecideOptions{})
			if v.Action != tc.wantAction || v.Reason != tc.wantReason || v.TokenRingHash != tc.wantHash {
				t.Fatalf("got %v/%s %q, want %v/%s %q", v.Action, v.Reason, v.TokenRingHash, tc.wantAction, tc.wantReason, tc.wantHash)
			}
		})
	}
}

func TestDecideOwnershipTrigger(t *testing.T) {
	ready := statusWith("current", "False", "True", "False")
	analysis := &Analysis{Nodes: map[string]NodeChange{
		"lost":   {Endpoint: "lost", Keyspaces: map[string]KeyspaceChange{"ks": {Lost: []Range{{1, 2}}}}},
		"gained": {Endpoint: "gained", Keyspaces: map[string]KeyspaceChange{"ks": {Gained: []Range{{1, 2}}}}},
	}}
	member := func(endpoint, last string) Member {
		return Member{Name: endpoint, Endpoint: endpoint, Annotations: map[string]string{CurrentTokenRingHashAnnotation: hashA, LastCleanedUpTokenRingHashAnnotation: last}}
	}
	own := DecideOptions{Trigger: TriggerOwnership, Analysis: analysis}
	for _, tc := range []struct {
		name       string
		m          Member
		opts       DecideOptions
		status     ClusterStatus
		wantAction Action
		wantReason string
	}{
		{"ring changed, node lost ranges", member("lost", hashB), own, ready, ActionStartCleanup, ReasonRangesLost},
		{"ring unchanged, node lost replicas (RF decrease)", member("lost", hashA), own, ready, ActionStartCleanup, ReasonRangesLost},
		{"ring changed, node only gained", member("gained", hashB), own, ready, ActionRecordCleanup, ReasonNoRangesLost},
		{"never cleaned, only gained", member("gained", NeverCleanedUp), own, ready, ActionRecordCleanup, ReasonNoRangesLost},
		{"ring unchanged, nothing lost", member("gained", hashA), own, ready, ActionNone, ReasonAsExpected},
		{"not in the analysed ring", member("joining", hashB), own, ready, ActionWait, ReasonNotInRing},
		{"lost, cluster not ready", member("lost", hashB), own, statusWith("stale", "False", "True", "False"), ActionWait, ReasonProgressing},
		{"only gained, cluster not ready", member("gained", hashB), own, statusWith("current", "True", "True", "False"), ActionWait, ReasonProgressing},
		{"no analysis falls back to the hash", member("gained", hashB), DecideOptions{Trigger: TriggerOwnership}, ready, ActionStartCleanup, ReasonTokenRingChanged},
		{"hash trigger ignores the analysis", member("gained", hashB), DecideOptions{Analysis: analysis}, ready, ActionStartCleanup, ReasonTokenRingChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(tc.m, tc.status, tc.opts)
			if v.Action != tc.wantAction || v.Reason != tc.wantReason {
				t.Fatalf("got %v/%s (%s), want %v/%s", v.Action, v.Reason, v.Message, tc.wantAction, tc.wantReason)
			}
			if (v.Action == ActionStartCleanup || v.Action == ActionRecordCleanup) && v.TokenRingHash != hashA {
				t.Fatalf("hash %q, want the current one", v.TokenRingHash)
			}
		})
	}
}

func TestSetJobConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	var conds []metav1.Condition

	changed := SetJobConditions(&conds, []Decision{{Member: "b", Action: ActionNone, Reason: ReasonAsExpected}}, 3, t0)
	if !changed || len(conds) != 2 {
		t.Fatalf("changed=%v conditions=%v", changed, conds)
	}
	for _, c := range conds {
		if c.Status != metav1.ConditionFalse || c.ObservedGeneration != 3 || !c.LastTransitionTime.Equal(&t0) {
			t.Errorf("%+v", c)
		}
	}
	if SetJobConditions(&conds, []Decision{{Member: "b", Action: ActionNone}}, 3, t1) {
		t.Error("reported a change for identical conditions")
	}

	decisions := []Decision{
		{Member: "c", Action: ActionStartCleanup, Reason: ReasonTokenRingChanged, Message: "c changed"},
		{Member: "a", Action: ActionWait, Reason: ReasonUnexpectedServiceState, Message: "a is broken"},
		{Member: "b", Action: ActionWait, Reason: ReasonProgressing, Message: "b waits"},
	}
	SetJobConditions(&conds, decisions, 4, t1)
	p, d := conds[0], conds[1]
	if p.Type != JobControllerProgressingCondition || p.Status != metav1.ConditionTrue || p.Message != "b waits\nc changed" || p.Reason != ReasonProgressing || !p.LastTransitionTime.Equal(&t1) {
		t.Errorf("progressing = %+v", p)
	}
	if d.Type != JobControllerDegradedCondition || d.Status != metav1.ConditionTrue || d.Reason != ReasonUnexpectedServiceState || d.Message != "a is broken" {
		t.Errorf("degraded = %+v", d)
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{ActionNone: "None", ActionWait: "Wait", ActionSeed: "Seed", ActionStartCleanup: "StartCleanup", ActionRecordCleanup: "RecordCleanup", Action(9): "Action(9)"} {
		if a.String() != want {
			t.Errorf("%d: %q", int(a), a.String())
		}
	}
}
