package client

import (
	"strings"
	"testing"
)

func TestConsumerFilterConfig(t *testing.T) {
	c := &Client{}
	cfg := DefaultConsumerConfig("t", "g")
	cfg.Tags, cfg.SQL = "A", "a > 1"
	if _, err := c.NewConsumer(cfg); err == nil || !strings.Contains(err.Error(), "cannot both be set") {
		t.Errorf("tags and SQL together: %v", err)
	}
	for _, tc := range []struct{ tags, sql, typ, expr string }{
		{"", "", FilterTag, ""},
		{"A || B", "", FilterTag, "A || B"},
		{"", "a > 1", FilterSQL, "a > 1"},
	} {
		cfg.Tags, cfg.SQL = tc.tags, tc.sql
		cn, err := c.NewConsumer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if typ, expr := cn.filter(); typ != tc.typ || expr != tc.expr {
			t.Errorf("tags %q sql %q: pull filter %s %q, want %s %q", tc.tags, tc.sql, typ, expr, tc.typ, tc.expr)
		}
	}
}
