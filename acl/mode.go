package acl

import "fmt"

// Mode says what a node or a name server does with a request it would refuse.
type Mode int

// Modes, RocketMQ-style names as --tls-mode has them.
const (
	// Disabled: nothing is checked (the default).
	Disabled Mode = iota
	// Permissive: every request is served; what enforcing would refuse is
	// logged and counted.
	Permissive
	// Enforcing: requests without a valid signature of a known user, or
	// without the permission they need, are refused.
	Enforcing
)

// ParseMode reads disabled, permissive or enforcing.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "disabled":
		return Disabled, nil
	case "permissive":
		return Permissive, nil
	case "enforcing":
		return Enforcing, nil
	}
	return Disabled, fmt.Errorf("auth mode %q: want disabled, permissive or enforcing", s)
}

func (m Mode) String() string {
	switch m {
	case Permissive:
		return "permissive"
	case Enforcing:
		return "enforcing"
	}
	return "disabled"
}
