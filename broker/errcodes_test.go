package broker

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
)

// sentinels are the broker's exported error kinds by name. A new Err var
// in the package fails TestSentinelsListed until it is listed here, and
// TestWireCodesComplete until the table maps it.
var sentinels = map[string]error{
	"ErrNotLeader":          ErrNotLeader,
	"ErrUnavailable":        ErrUnavailable,
	"ErrUnknownOutcome":     ErrUnknownOutcome,
	"ErrInvalidArgument":    ErrInvalidArgument,
	"ErrNotFound":           ErrNotFound,
	"ErrAlreadyExists":      ErrAlreadyExists,
	"ErrOutOfRange":         ErrOutOfRange,
	"ErrTooLarge":           ErrTooLarge,
	"ErrFailedPrecondition": ErrFailedPrecondition,
	"ErrShutdown":           ErrShutdown,
	"ErrTimeout":            ErrTimeout,
	"ErrBusy":               ErrBusy,
	"ErrSequenceReused":     ErrSequenceReused,
}

// TestSentinelsListed: the exported Err vars declared in the package's
// files are exactly those listed in sentinels.
func TestSentinelsListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(id.Name, "Err") && id.IsExported() {
						declared = append(declared, id.Name)
					}
				}
			}
		}
	}
	if !slices.Contains(declared, "ErrNotLeader") {
		t.Fatalf("found %v: the scan of the package's files is broken", declared)
	}
	for _, name := range declared {
		if _, ok := sentinels[name]; !ok {
			t.Errorf("%s is declared but not listed in sentinels (and so perhaps not in wireCodes)", name)
		}
	}
	for name := range sentinels {
		if !slices.Contains(declared, name) {
			t.Errorf("%s is listed in sentinels but not declared", name)
		}
	}
}

// TestWireCodesComplete: every sentinel is in the table exactly once, with
// one gRPC code and one RocketMQ code, and an error wrapping it alone is
// answered with them; a gRPC code in the table means one RocketMQ code.
func TestWireCodesComplete(t *testing.T) {
	rocket := []int16{rocketSystemError, rocketMessageIllegal, rocketServiceNotAvailable, rocketTopicNotExist}
	for name, s := range sentinels {
		n := 0
		for _, w := range wireCodes {
			if w.Err == s {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s is in wireCodes %d times, want once", name, n)
		}
	}
	for _, w := range wireCodes {
		if w.Err == nil {
			t.Errorf("%+v: an entry without a kind", w)
			continue
		}
		if w.GRPC == codes.OK || w.GRPC == codes.Unknown || w.GRPC > codes.Unauthenticated {
			t.Errorf("%v: gRPC code %v", w.Err, w.GRPC)
		}
		if !slices.Contains(rocket, w.RocketMQ) {
			t.Errorf("%v: RocketMQ code %d is none of %v", w.Err, w.RocketMQ, rocket)
		}
		got := CodeOf(fmt.Errorf("context: %w", w.Err))
		if got.Err != w.Err || got.GRPC != w.GRPC || got.RocketMQ != w.RocketMQ {
			t.Errorf("%v wrapped is answered %+v, want %+v: an earlier entry matches it", w.Err, got, w)
		}
		if r := RocketMQOfGRPC(w.GRPC); r != w.RocketMQ {
			t.Errorf("%v: gRPC %v means RocketMQ %d elsewhere in the table, here %d", w.Err, w.GRPC, r, w.RocketMQ)
		}
	}
	if w := CodeOf(errors.New("boom")); w.Err != nil || w.GRPC != codes.Internal || w.RocketMQ != rocketSystemError {
		t.Errorf("an error of no kind: %+v, want Internal and SYSTEM_ERROR", w)
	}
	if w := CodeOf(&NotLeaderError{LeaderID: "n2"}); w.Err != ErrNotLeader {
		t.Errorf("NotLeaderError: %+v, want ErrNotLeader's codes", w)
	}
	// An unknown outcome stays one when the wait for it was cut short.
	if w := CodeOf(fmt.Errorf("%w: %w", ErrUnknownOutcome, context.Canceled)); w.Err != ErrUnknownOutcome {
		t.Errorf("unknown outcome of a cancelled wait: %+v, want ErrUnknownOutcome's codes", w)
	}
}
