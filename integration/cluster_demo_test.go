package integration

import "testing"

// TestClusterDemoTwoGroups runs `raftmq demo --groups 2 --kills 2 --json`
// as a user would: two groups and a name server, producers through the
// several-group client, the leader of each group killed in turn. Both
// groups take writes, each kill has a window for its group and a gap
// figure for the other, and every acknowledged message is read back once
// from its group, queue and offset. The gap is reported, not judged: it
// depends on the machine's load.
func TestClusterDemoTwoGroups(t *testing.T) {
	procRequire(t)
	var res struct {
		Kills        int     `json:"kills"`
		Acknowledged int     `json:"acknowledged"`
		Consumed     int     `json:"consumed"`
		Lost         int     `json:"lost"`
		Duplicated   int     `json:"duplicated"`
		Misplaced    int     `json:"misplaced"`
		OffsetGaps   int     `json:"offset_gaps"`
		SurvivorMax  float64 `json:"survivor_gap_max_ms"`
		Groups       []struct {
			Name          string    `json:"name"`
			Acknowledged  int       `json:"acknowledged"`
			Consumed      int       `json:"consumed"`
			Killed        []string  `json:"killed"`
			WindowMs      []float64 `json:"window_ms"`
			SurvivorGapMs []float64 `json:"survivor_gap_ms"`
		} `json:"groups"`
	}
	runDemoJSON(t, &res, "--groups", "2", "--kills", "2")
	if res.Lost+res.Duplicated+res.Misplaced+res.OffsetGaps != 0 || res.Consumed != res.Acknowledged {
		t.Fatalf("lost %d, duplicated %d, misplaced %d, gaps %d; acknowledged %d, consumed %d",
			res.Lost, res.Duplicated, res.Misplaced, res.OffsetGaps, res.Acknowledged, res.Consumed)
	}
	if res.Kills != 2 || len(res.Groups) != 2 {
		t.Fatalf("kills %d, groups %d", res.Kills, len(res.Groups))
	}
	for _, g := range res.Groups {
		if g.Acknowledged == 0 || g.Consumed != g.Acknowledged {
			t.Fatalf("group %s: acknowledged %d, consumed %d", g.Name, g.Acknowledged, g.Consumed)
		}
		if len(g.Killed) != 1 || len(g.WindowMs) != 1 || len(g.SurvivorGapMs) != 1 || g.WindowMs[0] <= 0 || g.SurvivorGapMs[0] <= 0 {
			t.Fatalf("group %s: killed %v, window %v, gap while the other failed over %v", g.Name, g.Killed, g.WindowMs, g.SurvivorGapMs)
		}
		t.Logf("group %s: %d acknowledged; its window %v ms; its longest gap while the other failed over %v ms", g.Name, g.Acknowledged, g.WindowMs, g.SurvivorGapMs)
	}
}
