// Package remoting is RocketMQ's remoting protocol as bytes: the frame
// (int32 length, serialize type and header length, header, body), both
// header codecs (JSON with string-valued extFields, and RocketMQ's binary
// one), the v1 stored-message layout that pull responses carry, the
// batch-send body, message properties and zlib bodies; and the TCP plumbing
// both ends need: a Server that reads frames, runs a Handler per request and
// writes the answers, and a Client that sends requests and matches answers
// by opaque.
//
// It knows nothing of raftmq: it never imports the broker or the name
// server. Every length read from the network is checked against what is
// left of the frame, and a frame is at most MaxFrame (16 MiB) unless the
// caller sets less; a frame that cannot be read is answered or closed with a
// logged reason, never a panic or an allocation the frame did not pay for.
package remoting
