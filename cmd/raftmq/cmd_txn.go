package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// produce --transaction: each message is sent in a transaction of its own
// whose local transaction answers the flag's decision.
var txnFlags = [...]cli.Flag{
	&cli.StringFlag{Name: "transaction", Usage: "send each message in a transaction of its own and decide it: commit, rollback, or unknown (stored undecided: decide it later with `raftmq txn commit|rollback ID`)"},
	&cli.StringFlag{Name: "producer-group", Value: "raftmq-cli", Usage: "with --transaction: the producer group the half messages are sent under (PGROUP)"},
}

// txnSpec is what produce's transaction flags ask for; nil: no transaction.
type txnSpec struct {
	state client.TxnState
	group string
}

func parseTxnFlags(c *cli.Context, delay delaySpec) (*txnSpec, error) {
	if !c.IsSet("transaction") {
		if c.IsSet("producer-group") {
			return nil, usageError(c, "--producer-group is for --transaction")
		}
		return nil, nil
	}
	st, err := client.ParseTxnState(c.String("transaction"))
	if err != nil {
		return nil, usageError(c, "--transaction %q: want commit, rollback or unknown", c.String("transaction"))
	}
	if delay != (delaySpec{}) {
		return nil, usageError(c, "--transaction and a delay flag: a transactional message cannot be delayed")
	}
	if c.String("producer-group") == "" {
		return nil, usageError(c, "--producer-group: want a non-empty group")
	}
	return &txnSpec{state: st, group: c.String("producer-group")}, nil
}

// send sends m to topic in a transaction of its own and answers its ack
// (nil when it was not stored).
func (s *txnSpec) send(ctx context.Context, tp *client.TransactionProducer, topic string, m client.Message) (*api.Ack, error) {
	res, err := tp.SendInTransaction(ctx, topic, m, func(context.Context, *api.Ack) client.TxnState { return s.state })
	if err != nil && res.Ack != nil {
		return res.Ack, fmt.Errorf("message %s is stored undecided: its %s did not reach the group (decide it with `raftmq txn %s %s`): %w", res.Ack.Id, s.state, s.state, res.Ack.Id, err)
	}
	return res.Ack, err
}

// newTxnProducer is produce's transaction producer. Its check-back never
// runs: a command that leaves a half message undecided says how to decide
// it from the shell.
func newTxnProducer(cl *client.Client, s *txnSpec) (*client.TransactionProducer, error) {
	return cl.NewTransactionProducer(client.TransactionConfig{Group: s.group, CheckInterval: 24 * time.Hour,
		Check: func(context.Context, client.HalfMessage) client.TxnState { return client.TxnUnknown }})
}

// txnDone is what produce --transaction prints after an ack, in text.
func txnDone(st client.TxnState, id string) string {
	switch st {
	case client.TxnCommit:
		return "committed"
	case client.TxnRollback:
		return "rolled back"
	}
	return "undecided: decide with `raftmq txn commit " + id + "` or `raftmq txn rollback " + id + "`"
}

func txnCommand() *cli.Command {
	decide := func(name string, st client.TxnState, usage string) *cli.Command {
		return &cli.Command{
			Name:      name,
			Usage:     usage,
			ArgsUsage: "ID...",
			Description: "ID is a half message's id, as `raftmq produce --transaction unknown` or `raftmq txn list` prints it.\n" +
				"Deciding a half message that is already decided changes nothing and is no error.",
			Flags: clientFlags(
				&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Usage: "the half message's topic: it must match, and the call then needs publish on it (without it: admin on the cluster)"},
				&cli.StringFlag{Name: "producer-group", Usage: "the producer group the half message was sent under: it must match"},
				jsonFlag(),
			),
			Action: func(c *cli.Context) error {
				if c.NArg() == 0 {
					return usageError(c, "want at least one ID")
				}
				return withClient(c, func(ctx context.Context, cl *client.Client) error {
					var out []txnDecisionJSON
					for _, id := range c.Args().Slice() {
						if err := cl.EndTransaction(ctx, c.String("topic"), c.String("producer-group"), id, st); err != nil {
							return fmt.Errorf("%s %s: %w", name, id, clean(err))
						}
						out = append(out, txnDecisionJSON{ID: id, Decision: name})
						if !c.Bool("json") {
							fmt.Fprintf(c.App.Writer, "%s %s\n", id, txnDone(st, id))
						}
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, out)
					}
					return nil
				})
			},
		}
	}
	return &cli.Command{
		Name:  "txn",
		Usage: "list transactional half messages nobody decided yet, and commit or roll them back",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list undecided half messages, oldest first, with their age",
				Description: "A half message is stored by a transactional send and delivered to its topic only once\n" +
					"committed. The leader answers; the total counts every topic and producer group.",
				Flags: clientFlags(
					&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Usage: "only half messages bound for this topic (needs publish on it; without it: admin on the cluster)"},
					&cli.StringFlag{Name: "producer-group", Usage: "only half messages sent under this producer group"},
					&cli.DurationFlag{Name: "older-than", Usage: "only half messages stored at least this long ago"},
					&cli.IntFlag{Name: "max", Aliases: []string{"n"}, Value: 100, Usage: "list at most this many (1 to 1000)"},
					&cli.StringFlag{Name: "body-format", Value: "text", Usage: "how JSON carries bodies: text (base64 when not UTF-8), base64 or hex"},
					jsonFlag(),
				),
				Action: runTxnList,
			},
			decide("commit", client.TxnCommit, "commit half messages: each is delivered to its topic, once"),
			decide("rollback", client.TxnRollback, "roll back half messages: they are never delivered"),
		},
	}
}

type txnDecisionJSON struct {
	ID       string `json:"id"`
	Decision string `json:"decision"`
}

type halfJSON struct {
	ID            string `json:"id"`
	Topic         string `json:"topic"`
	Queue         int32  `json:"queue"`
	ProducerGroup string `json:"producer_group,omitempty"`
	Key           string `json:"key,omitempty"`
	Tag           string `json:"tag,omitempty"`
	Body          string `json:"body"`
	BodyEncoding  string `json:"body_encoding,omitempty"`
	StoredAtMs    int64  `json:"stored_at_ms,omitempty"`
	AgeMs         int64  `json:"age_ms"`
}

type halfListJSON struct {
	Pending  uint64     `json:"pending"`
	Messages []halfJSON `json:"messages"`
}

func runTxnList(c *cli.Context) error {
	if c.NArg() != 0 {
		return usageError(c, "txn list takes no arguments (got %q)", strings.Join(c.Args().Slice(), " "))
	}
	if n := c.Int("max"); n < 1 || n > 1000 {
		return usageError(c, "--max %d: want 1 to 1000", n)
	}
	if c.Duration("older-than") < 0 {
		return usageError(c, "--older-than %v: want 0 or more", c.Duration("older-than"))
	}
	if f := c.String("body-format"); f != "text" && f != "base64" && f != "hex" {
		return usageError(c, "--body-format %q: want text, base64 or hex", f)
	}
	return withClient(c, func(ctx context.Context, cl *client.Client) error {
		hs, pending, err := cl.PendingHalfMessages(ctx, c.String("topic"), c.String("producer-group"), c.Duration("older-than"), c.Int("max"))
		if err != nil {
			return clean(err)
		}
		now := time.Now()
		out := halfListJSON{Pending: pending, Messages: []halfJSON{}}
		for _, h := range hs {
			j := halfJSON{ID: h.ID, Topic: h.Topic, Queue: h.Queue, ProducerGroup: h.ProducerGroup, Key: h.Key, Tag: h.Tag}
			j.Body, j.BodyEncoding = jsonBody(c, h.Body)
			if !h.StoredAt.IsZero() {
				j.StoredAtMs, j.AgeMs = h.StoredAt.UnixMilli(), now.Sub(h.StoredAt).Milliseconds()
			}
			out.Messages = append(out.Messages, j)
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, out)
		}
		w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tTOPIC\tQUEUE\tPRODUCER GROUP\tAGE\tKEY\tBODY")
		for _, j := range out.Messages {
			age := "?"
			if j.StoredAtMs != 0 {
				age = (time.Duration(j.AgeMs) * time.Millisecond).Round(100 * time.Millisecond).String()
			}
			body := j.Body
			if r := []rune(body); len(r) > 40 {
				body = string(r[:37]) + "..."
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", j.ID, j.Topic, j.Queue, j.ProducerGroup, age, j.Key, body)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "%d listed; %d undecided half messages in all\n", len(out.Messages), pending)
		return nil
	})
}
