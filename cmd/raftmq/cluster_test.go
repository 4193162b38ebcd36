package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every RAFTMQ_ variable means one thing across commands: the ones the
// cluster work added are read only where they mean what they say.
func TestClusterEnvironmentVariables(t *testing.T) {
	cmds := []*cli.Command{serverCommand(), namesrvCommand(), clusterCommand(), topicCommand(), produceCommand(), consumeCommand()}
	owners := map[string][]string{}
	var walk func(path string, c *cli.Command)
	walk = func(path string, c *cli.Command) {
		path += " " + c.Name
		for _, f := range c.Flags {
			if sf, ok := f.(*cli.StringFlag); ok {
				for _, e := range sf.EnvVars {
					owners[e] = append(owners[e], path+" --"+sf.Name)
				}
			}
		}
		for _, sc := range c.Subcommands {
			walk(path, sc)
		}
	}
	for _, c := range cmds {
		addEnv(c, envPrefix[c.Name])
		walk("raftmq", c)
	}
	for env, want := range map[string]string{"RAFTMQ_BROKER_NAME": "--broker-name", "RAFTMQ_CLUSTER": "--cluster", "RAFTMQ_NAMESRV": "--namesrv"} {
		if len(owners[env]) == 0 {
			t.Errorf("%s is read by no flag", env)
		}
		for _, o := range owners[env] {
			if !strings.HasSuffix(o, want) {
				t.Errorf("%s is read by %s, want only %s flags", env, o, want)
			}
		}
	}
	for _, o := range owners["RAFTMQ_GROUP"] {
		if strings.HasPrefix(o, "raftmq server") {
			t.Errorf("RAFTMQ_GROUP (the consumer group of other commands) is read by %s", o)
		}
	}
	if len(owners["RAFTMQ_CLUSTER"]) != 1 || !strings.HasPrefix(owners["RAFTMQ_CLUSTER"][0], "raftmq server") {
		t.Errorf("RAFTMQ_CLUSTER read by %v, want only server --cluster", owners["RAFTMQ_CLUSTER"])
	}
}

func TestNamesrvAndServersTogetherIsAUsageError(t *testing.T) {
	for _, args := range [][]string{
		{"produce", "-t", "x", "-s", "127.0.0.1:1", "--namesrv", "127.0.0.1:2", "m"},
		{"consume", "-t", "x", "-s", "127.0.0.1:1", "--namesrv", "127.0.0.1:2"},
		{"topic", "create", "x", "-s", "127.0.0.1:1", "--namesrv", "127.0.0.1:2"},
		{"topic", "create", "x", "--groups", "a"},
		{"topic", "update", "x", "--add-queues", "2"},
		{"topic", "list", "-s", "127.0.0.1:1", "--namesrv", "127.0.0.1:2"},
		{"topic", "describe", "x", "-s", "127.0.0.1:1", "--namesrv", "127.0.0.1:2"},
		{"topic", "update", "x", "--perm", "6", "--groups", "a"},
		{"topic", "update", "x", "-s", "127.0.0.1:1", "--namesrv", "127.0.0.1:2", "--add-queues", "2"},
	} {
		_, errOut, code := runCLI(args...)
		if code != 2 || !strings.Contains(errOut, "--namesrv") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming --namesrv", args, code, errOut)
		}
	}
}

func TestClusterStatusWithoutANameServer(t *testing.T) {
	_, errOut, code := runCLI("cluster", "status", "--namesrv", "127.0.0.1:1", "--timeout", "1s")
	if code != 3 {
		t.Errorf("cluster status against no name server: exit %d (%q), want 3", code, errOut)
	}
}

func TestTopicUpdateWantsOneChange(t *testing.T) {
	for _, args := range [][]string{
		{"topic", "update", "x"},
		{"topic", "update", "x", "--perm", "6", "--add-queues", "2", "--namesrv", "127.0.0.1:2"},
		{"topic", "update", "x", "--add-queues", "0", "--namesrv", "127.0.0.1:2"},
	} {
		if _, errOut, code := runCLI(args...); code != 2 {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, errOut)
		}
	}
}

// consume --namesrv reads as a consumer group: without --group, or with a
// reader's --offset, it is a usage error, not a consumer that fails later.
func TestConsumeThroughNamesrvNeedsAGroup(t *testing.T) {
	for _, args := range [][]string{
		{"consume", "-t", "x", "--namesrv", "127.0.0.1:1"},
		{"consume", "-t", "x", "--namesrv", "127.0.0.1:1", "-g", "g", "--offset", "start"},
	} {
		_, errOut, code := runCLI(args...)
		if code != 2 || !strings.Contains(errOut, "--group") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming --group", args, code, errOut)
		}
	}
}

// Every command that talks to one group can find it through the name
// servers: --namesrv and --broker-name beside -s.
func TestOneGroupCommandsTakeNamesrvAndBrokerName(t *testing.T) {
	for _, cmd := range [][]string{{"status"}, {"health"}, {"group", "list"}, {"group", "describe"}, {"group", "reset"},
		{"message", "show"}, {"dlq", "list"}, {"dlq", "resend"}, {"bench", "produce"}, {"bench", "consume"}, {"bench", "e2e"},
		{"leader", "transfer"}, {"member", "add"}, {"topic", "delete"}, {"produce"}, {"consume"}, {"topic", "describe"}} {
		out, errOut, code := runCLI(append(cmd, "--help")...)
		if code != 0 || !strings.Contains(out, "--namesrv") || !strings.Contains(out, "--broker-name") {
			t.Errorf("raftmq %s --help: exit %d, want --namesrv and --broker-name in it:\n%s%s", strings.Join(cmd, " "), code, out, errOut)
		}
	}
	for _, args := range [][]string{
		{"status", "--broker-name", "ga"},
		{"group", "list", "-s", "127.0.0.1:1", "--broker-name", "ga"},
		{"status", "-s", "127.0.0.1:1", "--namesrv", "127.0.0.1:2", "--broker-name", "ga"},
	} {
		_, errOut, code := runCLI(args...)
		if code != 2 || !strings.Contains(errOut, "--namesrv") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming --namesrv", args, code, errOut)
		}
	}
	if _, errOut, code := runCLI("status", "--namesrv", "127.0.0.1:1", "--broker-name", "ga"); code != 3 {
		t.Errorf("status through a name server that does not answer: exit %d (%q), want 3", code, errOut)
	}
}
