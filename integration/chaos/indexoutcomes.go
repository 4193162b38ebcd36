package chaos

import (
	"bufio"
	"os"
	"strings"
)

// indexLines are the server log lines of a queue index rebuild
// (store/rebuild.go) and the outcome each counts as.
var indexLines = []struct{ line, outcome string }{
	{"queue index rebuilt", "queue index: rebuilt from the log"},
	{"a damaged range cannot be rebuilt from this node's log", "queue index: a range left to peers"},
	{"nothing of it could be rebuilt from this node's log", "queue index: nothing rebuilt"},
	{"queue index: rebuild failed", "queue index: rebuild failed"},
}

// indexOutcomes counts the queue index rebuilds the nodes of c logged over
// the run, so that a run's outcomes show whether a damaged index was
// rebuilt or left to peers (the checker verifies what was served either way).
func indexOutcomes(c *Cluster) map[string]int {
	out := map[string]int{}
	if c == nil {
		return out
	}
	for _, n := range c.Nodes {
		f, err := os.Open(n.Log)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			l := sc.Text()
			if !strings.Contains(l, "queue index") {
				continue
			}
			for _, il := range indexLines {
				if strings.Contains(l, il.line) {
					out[il.outcome]++
				}
			}
		}
		f.Close()
	}
	return out
}
