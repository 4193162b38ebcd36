package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// A run over several groups (RunGroups): N groups, each a whole run of
// its own (Run with a GroupPart: its own schedule of faults, workload and
// checks, the logs of its nodes read offline), registered with one name
// server that a nemesis of its own SIGKILLs and starts again on the same
// address. Meanwhile producers of the several-group client write a shared
// topic spread over every group through the name server; each group's run
// reads that topic's queues on its group back (from disk, a fresh consumer
// group and every node) and checks them against what the producers were
// told about that group.

// SharedTopic is the topic the several-group client writes.
const SharedTopic = "chaos-shared"

// SharedTxnGroup is the producer group of the several-group client's
// transactions (with RunConfig.Transactions), one of its own so that only
// its check-back is asked about them.
const SharedTxnGroup = "chaos-shared-txn"

// GroupsConfig configures RunGroups.
type GroupsConfig struct {
	RunConfig // Dir, Seed, Duration and the rest, for every group's run
	// Groups is the number of groups (default 2).
	Groups int
	// NameServerFaults SIGKILLs the name server (and starts it again on
	// the same address) during the fault phase.
	NameServerFaults bool
	// SharedWorkers is the number of several-group producers (default 3).
	SharedWorkers int
	// Plans, when set, are the groups' schedules (one each) instead of
	// schedules drawn from their seeds.
	Plans []*Plan
}

// GroupsResult is what a run over several groups found.
type GroupsResult struct {
	Seed  int64     `json:"seed"`
	Dir   string    `json:"dir"`
	Runs  []*Result `json:"runs"` // one per group, in order ga, gb, ...
	Names []string  `json:"groups"`
	// NameServerKills is how often the name server was SIGKILLed.
	NameServerKills int `json:"namesrv_kills"`
	// SharedAcked counts the several-group client's acknowledged sends per
	// group, SharedFailed its failed or unknown ones.
	SharedAcked  map[string]int `json:"shared_acked"`
	SharedFailed int            `json:"shared_failed"`
	Elapsed      time.Duration  `json:"elapsed_ns"`
	Err          string         `json:"error,omitempty"`
}

// OK is true when every group's run is and the harness did its part.
func (r *GroupsResult) OK() bool {
	if r.Err != "" || len(r.Runs) == 0 {
		return false
	}
	for _, g := range r.Runs {
		if g == nil || !g.OK() || g.Shared == nil {
			return false
		}
	}
	return true
}

// Line is the one-line summary of the run, then one line per group.
func (r *GroupsResult) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed=%d groups=%d namesrv-kills=%d shared-acked=%v shared-not-acked=%d elapsed=%s",
		r.Seed, len(r.Names), r.NameServerKills, r.SharedAcked, r.SharedFailed, r.Elapsed.Round(100*time.Millisecond))
	if r.Err != "" {
		b.WriteString(" HARNESS ERROR: " + r.Err)
	}
	if r.OK() {
		b.WriteString(" ok")
	} else {
		b.WriteString(" FAIL (in " + r.Dir + ")")
	}
	for i, g := range r.Runs {
		if g != nil {
			fmt.Fprintf(&b, "\n  group %s: %s", r.Names[i], g.Line())
		}
	}
	return b.String()
}

// RunGroups runs cfg.Groups groups and a name server with faults in every
// group and, with NameServerFaults, in the name server; see the comment
// at the top of this file.
func RunGroups(ctx context.Context, cfg GroupsConfig) *GroupsResult {
	start := time.Now()
	if cfg.Groups <= 0 {
		cfg.Groups = 2
	}
	if cfg.SharedWorkers <= 0 {
		cfg.SharedWorkers = 3
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	res := &GroupsResult{Seed: cfg.Seed, Dir: cfg.Dir, SharedAcked: map[string]int{}}
	defer func() { res.Elapsed = time.Since(start) }()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		res.Err = err.Error()
		return res
	}
	ports, err := localgroup.FreePorts(1)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	ns := &nameServer{bin: cfg.Bin, addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), log: filepath.Join(cfg.Dir, "namesrv.log")}
	if err := ns.start(); err != nil {
		res.Err = "start the name server: " + err.Error()
		return res
	}
	defer ns.stop()

	recs := map[string]*history.Recorder{}
	txns := &sharedTxns{recs: recs}
	var ready sync.WaitGroup
	quiet := make(chan struct{}) // closed when the shared producers have stopped
	var (
		smu        sync.Mutex
		stopShared func()
		stopped    bool
		stopOnce   sync.Once
	)
	quiesce := func() {
		stopOnce.Do(func() {
			smu.Lock()
			stopped = true
			f := stopShared
			smu.Unlock()
			if f != nil {
				f()
			}
			close(quiet)
		})
		<-quiet
	}
	var runs sync.WaitGroup
	res.Runs = make([]*Result, cfg.Groups)
	for i := 0; i < cfg.Groups; i++ {
		name := fmt.Sprintf("g%c", 'a'+i)
		res.Names = append(res.Names, name)
		recs[name] = history.NewRecorder()
		ready.Add(1)
		var once sync.Once
		rc := cfg.RunConfig
		rc.Dir = filepath.Join(cfg.Dir, name)
		rc.Seed = cfg.Seed + int64(i)*100_003 // a schedule of its own
		rc.Logf = func(format string, args ...any) { cfg.Logf(name+": "+format, args...) }
		if i < len(cfg.Plans) {
			rc.Plan = cfg.Plans[i]
			rc.Faults = nil
			for _, e := range rc.Plan.Episodes {
				rc.Faults = append(rc.Faults, e.Kinds...)
			}
		}
		rc.Part = &GroupPart{Name: name, NameServer: ns.addr, Topic: SharedTopic, Rec: recs[name],
			Ready: func() { once.Do(ready.Done) }, Quiesce: quiesce}
		if cfg.Transactions {
			rc.Part.TxnGroup, rc.Part.TxnCheck = SharedTxnGroup, txns.check
		}
		runs.Add(1)
		go func() {
			defer runs.Done()
			defer once.Do(ready.Done) // a run that failed before it was ready
			res.Runs[i] = Run(ctx, rc)
		}()
	}
	defer runs.Wait()
	defer quiesce() // whatever happens, the shared producers stop

	// Every group is up: the shared topic over all of them, and its
	// producers.
	ready.Wait()
	ccfg := cluster.DefaultConfig()
	ccfg.NameServers = []string{ns.addr}
	ccfg.RefreshInterval = time.Second
	ccfg.Client.RequestTimeout = 2 * time.Second
	ccfg.Client.RetryTimeout = 10 * time.Second
	cl, err := cluster.New(ccfg)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer cl.Close()
	if err := retry(ctx, 60*time.Second, func(ctx context.Context) error {
		if _, err := cl.Refresh(ctx); err != nil {
			return err
		}
		if _, err := cl.CreateTopic(ctx, SharedTopic, 2*cfg.Groups, nil, true); err != nil {
			return err
		}
		r, err := cl.Route(ctx, SharedTopic)
		if err != nil {
			return err
		}
		if len(r.Groups) != cfg.Groups {
			return fmt.Errorf("route of %s: groups %v", SharedTopic, r.Groups)
		}
		return nil
	}); err != nil {
		res.Err = fmt.Sprintf("create %s over every group: %v", SharedTopic, err)
		return res
	}
	smu.Lock()
	if !stopped { // else a group's run is past its fault phase already
		sctx, cancel := context.WithCancel(ctx)
		p := cl.NewProducer(client.DefaultProducerConfig())
		var shared sync.WaitGroup
		var mu sync.Mutex
		for w := 0; w < cfg.SharedWorkers; w++ {
			shared.Add(1)
			go func() {
				defer shared.Done()
				sharedProducer(sctx, p, w, res.Names, recs, func(group string, ok bool) {
					mu.Lock()
					defer mu.Unlock()
					if ok {
						res.SharedAcked[group]++
					} else {
						res.SharedFailed++
					}
				})
			}()
		}
		// A consumer of the shared topic through the name server, all
		// along: what it is handed is checked against each group's log.
		ccfg := client.DefaultConsumerConfig(SharedTopic, "shared-live")
		ccfg.MaxMessages = 64
		ccfg.Wait = 200 * time.Millisecond
		if cons, err := cl.NewConsumer(sctx, cluster.ConsumerConfig{Consumer: ccfg}); err != nil {
			cfg.Logf("shared consumer: %v", err)
		} else {
			shared.Add(1)
			go func() {
				defer shared.Done()
				sharedConsumer(sctx, cons, recs)
			}()
		}
		var tp *cluster.TransactionProducer
		if cfg.Transactions {
			// Transactions through the name server too: each half
			// message goes to one group and is decided there.
			tp, err = cl.NewTransactionProducer(sctx, client.TransactionConfig{Group: SharedTxnGroup, Check: txns.check,
				Timeout: txnTimeout, CheckInterval: txnCheckInterval, Topics: []string{SharedTopic}})
			if err != nil {
				cfg.Logf("shared transaction producer: %v", err)
			} else {
				shared.Add(1)
				go func() {
					defer shared.Done()
					txns.produce(sctx, tp, rand.New(rand.NewSource(cfg.Seed*11+5)))
				}()
			}
		}
		stopShared = func() {
			cancel()
			shared.Wait()
			p.Close()
			if tp != nil {
				tp.Close()
			}
		}
	}
	smu.Unlock()

	// The name server's own faults, until the groups' fault phases end.
	if cfg.NameServerFaults {
		rng := rand.New(rand.NewSource(cfg.Seed*7 + 3))
		deadline := time.Now().Add(cfg.Duration)
		for time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
			case <-quiet:
			case <-time.After(time.Duration(1500+rng.Intn(2500)) * time.Millisecond):
			}
			if ctx.Err() != nil || isClosed(quiet) || time.Now().After(deadline) {
				break
			}
			hold := time.Duration(500+rng.Intn(2500)) * time.Millisecond
			for _, r := range recs {
				r.Event("namesrv", "SIGKILL the name server for %s", hold)
			}
			if err := ns.kill(); err != nil {
				res.Err = "kill the name server: " + err.Error()
				break
			}
			res.NameServerKills++
			select {
			case <-ctx.Done():
			case <-time.After(hold):
			}
			if err := ns.start(); err != nil {
				res.Err = "start the name server again: " + err.Error()
				break
			}
			for _, r := range recs {
				r.Event("namesrv", "name server started again on %s", ns.addr)
			}
		}
	}
	runs.Wait()
	if !res.OK() {
		os.WriteFile(filepath.Join(cfg.Dir, "result.txt"), []byte(res.Line()+"\n"), 0o644)
	} else if !cfg.Keep {
		os.RemoveAll(cfg.Dir)
	}
	return res
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// sharedProducer sends one unkeyed message at a time through the
// several-group producer until ctx ends, and records each send with the
// recorder of the group it went to. A send whose group is not known (it
// failed before a group was chosen) goes to every group's record: it must
// not be stored anywhere if it failed, and may be anywhere if its outcome
// is unknown.
func sharedProducer(ctx context.Context, p *cluster.Producer, worker int, names []string, recs map[string]*history.Recorder, count func(string, bool)) {
	name := fmt.Sprintf("shared%d", worker)
	for seq := uint64(1); ctx.Err() == nil; seq++ {
		bname := fmt.Sprintf("%s-%06d", name, seq)
		msg := client.Message{Body: body(bname, 0)}
		// Every send gets its own deadline, not ctx: stopping the
		// producers lets a request in flight finish.
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		invoked := time.Now()
		acks, err := p.Send(sctx, SharedTopic, cluster.Message{Message: msg})
		cancel()
		took := time.Since(invoked)
		var groups []string
		var se *cluster.SendError
		switch {
		case err == nil && len(acks) == 1:
			groups = []string{acks[0].Group}
		case errors.As(err, &se):
			groups = []string{se.Group}
		default:
			groups = names
		}
		for _, g := range groups {
			r := recs[g]
			if r == nil {
				continue
			}
			inv := r.Now() - time.Since(invoked)
			var as []*api.Ack
			if err == nil {
				as = []*api.Ack{acks[0].Ack}
			}
			r.AddOp(history.Sent(name, seq, []client.Message{msg}, inv, inv+took, as, err))
		}
		count(groups[0], err == nil)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// sharedTxns is the several-group client's transactions: what it decided
// for each (its check-back answers that), and where each went.
type sharedTxns struct {
	recs  map[string]*history.Recorder // each group's record of the shared topic
	final sync.Map                     // body name -> history.TxnCommit or TxnRollback
	group sync.Map                     // body name -> the group that stored its half message, once known
}

// produce sends one message per transaction through tp until ctx ends,
// its decisions drawn as RunTxnProducer draws them, and records each with
// the group that stored its half message, or with every group when its
// send failed before any group was known.
func (s *sharedTxns) produce(ctx context.Context, tp *cluster.TransactionProducer, rng *rand.Rand) {
	const name = "sharedtx"
	for seq := uint64(1); ctx.Err() == nil; seq++ {
		bname := fmt.Sprintf("%s-%06d-0", name, seq)
		m, sm, tx := drawTxn(rng, name, bname, 0, SharedTxnGroup)
		s.final.Store(bname, tx.Final)
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		invoked := time.Now()
		res, err := tp.SendInTransaction(sctx, SharedTopic, cluster.Message{Message: m}, func(_ context.Context, a cluster.Ack) client.TxnState {
			s.group.Store(bname, a.Group)
			if r := s.recs[a.Group]; r != nil {
				return localAnswer(tx, r)
			}
			return client.TxnUnknown
		})
		cancel()
		took := time.Since(invoked)
		var groups []string
		var se *cluster.SendError
		switch {
		case res.Ack.Ack != nil:
			groups = []string{res.Ack.Group}
		case errors.As(err, &se):
			groups = []string{se.Group}
		default:
			for g := range s.recs {
				groups = append(groups, g)
			}
		}
		for _, g := range groups {
			r := s.recs[g]
			if r == nil {
				continue
			}
			op := history.Op{Worker: name, Seq: seq, Messages: []history.SentMessage{sm}, Txn: tx}
			op.Invoke = r.Now() - time.Since(invoked)
			op.Complete = op.Invoke + took
			txnOutcome(&op, res.Ack.Ack, err)
			r.AddOp(op)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// check is the check-back of SharedTxnGroup in every group: it answers
// the decision drawn for the message and records the answer with the
// group that stored it (every group while that is not known).
func (s *sharedTxns) check(_ context.Context, m client.HalfMessage) client.TxnState {
	name := history.BodyName(m.Body)
	v, ok := s.final.Load(name)
	if !ok {
		return client.TxnUnknown // not the workload's
	}
	recs := s.recs
	if g, ok := s.group.Load(name); ok {
		recs = map[string]*history.Recorder{g.(string): s.recs[g.(string)]}
	}
	for _, r := range recs {
		if r != nil {
			r.AddTxnCheck(history.TxnCheck{Body: name, Answer: v.(string), At: r.Now()})
		}
	}
	if v == history.TxnCommit {
		return client.TxnCommit
	}
	return client.TxnRollback
}

// sharedConsumer polls cons until ctx ends and records every message it
// is handed with the recorder of the group it came from.
func sharedConsumer(ctx context.Context, cons *cluster.Consumer, recs map[string]*history.Recorder) {
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		cons.Close(cctx)
		cancel()
	}()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		got, err := cons.Poll(pctx)
		cancel()
		for _, r := range got {
			if rec := recs[r.Group]; rec != nil {
				rec.AddDelivery(history.Delivery{Consumer: "shared-live", Queue: r.Queue, Offset: r.Offset, ID: r.Id,
					Body: history.BodyName(r.Body), Hash: history.BodyHash(r.Body), ServedBy: r.ServedBy,
					ServedByLeader: r.ServedByLeader, At: rec.Now()})
			}
		}
		if err != nil && len(got) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// nameServer is a `raftmq namesrv` process on a fixed address.
type nameServer struct {
	bin, addr, log string
	p              localgroup.Process
}

func (n *nameServer) start() error {
	if _, err := n.p.Launch(n.bin, []string{"namesrv", "--listen", n.addr, "--expiry", "30s"}, n.log); err != nil {
		return err
	}
	// Answering: a TCP connect succeeds.
	return retry(context.Background(), 15*time.Second, func(context.Context) error {
		if !n.p.Running() {
			return fmt.Errorf("exited (log %s)", n.log)
		}
		return dialOK(n.addr)
	})
}

func (n *nameServer) kill() error {
	_, err := n.p.SignalAndWait(syscall.SIGKILL, 10*time.Second)
	return err
}

func (n *nameServer) stop() {
	if n.p.Running() {
		n.p.SignalAndWait(syscall.SIGKILL, 10*time.Second)
	}
}

// dialOK says whether addr accepts a TCP connection.
func dialOK(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
