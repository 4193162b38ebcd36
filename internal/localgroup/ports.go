package localgroup

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

// FreePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago. They come from below the kernel's ephemeral range, so an outgoing
// connection cannot take one while its node is down for a restart.
func FreePorts(n int) ([]int, error) {
	lo, hi := 20000, 32000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if first, err := strconv.Atoi(f[0]); err == nil && first > 11000 && first <= 32768 {
				hi = first
				lo = max(hi-12000, 10000)
			}
		}
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("no free port on 127.0.0.1")
		}
		p := lo + rand.IntN(hi-lo)
		if portsUsed[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		portsUsed[p] = true
		out = append(out, p)
	}
	return out, nil
}
