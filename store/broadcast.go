package store

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxMemberLen bounds a consumer group member's id.
const MaxMemberLen = 255

// A broadcasting consumer group's members each keep their own offsets. They
// live in the same offsets table as a group's, under the key
// MemberKey(group, member) = "<group>/<member id>": group names never hold
// '/' (ValidateName), so such a key is never a group's name, and the group
// is the part before the first '/'.

// MemberKey is the offsets key of one broadcasting member of group.
func MemberKey(group, member string) string { return group + "/" + member }

// SplitMemberKey splits an offsets key into its group and member; ok is
// false for a group's own key.
func SplitMemberKey(key string) (group, member string, ok bool) {
	return strings.Cut(key, "/")
}

// ValidateMember checks a consumer group member's id.
func ValidateMember(member string) error {
	switch {
	case member == "" || len(member) > MaxMemberLen:
		return fmt.Errorf("%w: member id is %d bytes, want 1..%d", ErrInvalidName, len(member), MaxMemberLen)
	case !utf8.ValidString(member):
		return fmt.Errorf("%w: member id %q is not valid UTF-8", ErrInvalidName, member)
	}
	return nil
}

// validateOffsetsKey checks the owner of committed offsets: a group, or a
// broadcasting member of one (MemberKey).
func validateOffsetsKey(key string) error {
	group, member, ok := SplitMemberKey(key)
	if err := ValidateName("group", group); err != nil {
		return err
	}
	if ok {
		return ValidateMember(member)
	}
	return nil
}
