package mq

// MessageIDLen is the length of a message id: the log index of the
// message's entry in 16 upper-case hex digits, then its ordinal inside the
// entry in 8. Every node of a group gives a message the same id.
const MessageIDLen = 24

// AppendMessageID appends the id of message ordinal of the entry at log
// index to dst.
func AppendMessageID(dst []byte, index uint64, ordinal uint32) []byte {
	const hexdigits = "0123456789ABCDEF"
	var b [MessageIDLen]byte
	for i := 15; i >= 0; i-- {
		b[i] = hexdigits[index&0xF]
		index >>= 4
	}
	for i := MessageIDLen - 1; i >= 16; i-- {
		b[i] = hexdigits[ordinal&0xF]
		ordinal >>= 4
	}
	return append(dst, b[:]...)
}
