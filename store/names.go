package store

import (
	"fmt"
	"regexp"
)

// Limits of the replicated state.
const (
	MaxQueues      = 1024
	MaxNameLen     = 127
	DedupeWindow   = 1024  // sequences remembered per producer
	MaxProducers   = 65536 // producers remembered, least recently used evicted
	DefaultQueues  = 4
	maxSkipPerRec  = 1 << 16
	snapshotFormat = 5 // 2: remembered results carry the request's digest and message counts; 3: no index records; 4: transaction decisions; 5: users
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._%-]+$`)

// ValidateName checks a topic or consumer group name.
func ValidateName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s name is empty", ErrInvalidName, kind)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %s name is %d bytes, at most %d", ErrInvalidName, kind, len(name), MaxNameLen)
	case !nameRE.MatchString(name):
		return fmt.Errorf("%w: %s name %q may only hold letters, digits and . _ %% -", ErrInvalidName, kind, name)
	}
	return nil
}
