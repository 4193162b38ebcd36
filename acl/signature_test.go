package acl

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestSignatureKnownVector: the signature of a request as
// rocketmq-client-go's ACLInterceptor makes it: AccessKey joins the ext
// fields, values sorted by key (AccessKey, producerGroup, topic)
// concatenated, then the body; HMAC-SHA1 with the secret, standard Base64.
// The expected value was computed outside Go (Python hmac/hashlib).
func TestSignatureKnownVector(t *testing.T) {
	ext := map[string]string{"topic": "orders", "producerGroup": "pg", FieldAccessKey: "u1"}
	if got := string(SignedContent(ext, []byte("hello"))); got != "u1pgordershello" {
		t.Fatalf("content %q", got)
	}
	const want = "3/iTeuKznlBUrEGAhix9XmfS8Tc="
	if got := Sign([]byte("s3cr3t"), SignedContent(ext, []byte("hello"))); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	ext[FieldSignature] = want
	if !VerifySignature(ext, []byte("hello"), []byte("s3cr3t")) {
		t.Fatal("the known signature does not verify")
	}
	for name, tc := range map[string]struct {
		body, secret string
		mod          func(map[string]string)
	}{
		"body changed":     {"hellO", "s3cr3t", nil},
		"wrong secret":     {"hello", "s3cr3T", nil},
		"field changed":    {"hello", "s3cr3t", func(m map[string]string) { m["topic"] = "orderz" }},
		"field added":      {"hello", "s3cr3t", func(m map[string]string) { m["queueId"] = "1" }},
		"other access key": {"hello", "s3cr3t", func(m map[string]string) { m[FieldAccessKey] = "u2" }},
		"no signature":     {"hello", "s3cr3t", func(m map[string]string) { delete(m, FieldSignature) }},
	} {
		m := map[string]string{}
		for k, v := range ext {
			m[k] = v
		}
		if tc.mod != nil {
			tc.mod(m)
		}
		if VerifySignature(m, []byte(tc.body), []byte(tc.secret)) {
			t.Errorf("%s: verified", name)
		}
	}
}

// TestSignatureSecurityToken: the Go client sends SecurityToken without
// signing it, the Java client signs it; both verify, and a token added to
// a request signed without one still verifies only as the Go client's.
func TestSignatureSecurityToken(t *testing.T) {
	secret := []byte("sk")
	goExt := map[string]string{"topic": "t", FieldAccessKey: "ak"}
	goExt[FieldSignature] = Sign(secret, SignedContent(goExt, nil))
	goExt[FieldSecurityToken] = "tok"
	if !VerifySignature(goExt, nil, secret) {
		t.Fatal("Go client's request (token not signed) refused")
	}
	javaExt := map[string]string{"topic": "t", FieldAccessKey: "ak", FieldSecurityToken: "tok"}
	SignRequest(javaExt, []byte("b"), "ak", secret)
	if !VerifySignature(javaExt, []byte("b"), secret) {
		t.Fatal("Java client's request (token signed) refused")
	}
	javaExt["topic"] = "u"
	if VerifySignature(javaExt, []byte("b"), secret) {
		t.Fatal("changed request verified")
	}
	// The Java client's query by unique key: the flag added after signing.
	q := map[string]string{"topic": "t", "key": "K"}
	SignRequest(q, nil, "ak", secret)
	q[FieldUniqueKeyQuery] = "true"
	if !VerifySignature(q, nil, secret) {
		t.Fatal("query by unique key (flag unsigned) refused")
	}
	q["key"] = "L"
	if VerifySignature(q, nil, secret) {
		t.Fatal("changed query verified")
	}
}

// FuzzVerifySignature: any request signed by SignRequest verifies with its
// secret and with no other, and any change to its body or a field value is
// caught; nothing panics on arbitrary fields.
func FuzzVerifySignature(f *testing.F) {
	f.Add([]byte("topic\x00orders\x00producerGroup\x00pg"), []byte("hello"), []byte("s3cr3t"), uint16(0))
	f.Add([]byte("a\x00\x00b\x00x\x00Signature\x00junk"), []byte{}, []byte("k"), uint16(3))
	f.Add([]byte(""), []byte("\x00\xff"), []byte(""), uint16(7))
	f.Fuzz(func(t *testing.T, fields, body, secret []byte, flip uint16) {
		parts := bytes.Split(fields, []byte{0})
		ext := map[string]string{}
		for i := 0; i+1 < len(parts); i += 2 {
			ext[string(parts[i])] = string(parts[i+1])
		}
		_ = VerifySignature(ext, body, secret) // arbitrary input: no panic
		SignRequest(ext, body, "ak", secret)
		if !VerifySignature(ext, body, secret) {
			t.Fatalf("signed request does not verify: %q", ext)
		}
		if VerifySignature(ext, body, append(bytes.Clone(secret), 'x')) {
			t.Fatal("verified with another secret")
		}
		if len(body) > 0 {
			b := bytes.Clone(body)
			b[int(flip)%len(b)] ^= 1
			if VerifySignature(ext, b, secret) {
				t.Fatal("verified with a changed body")
			}
		}
		var key [2]byte
		binary.BigEndian.PutUint16(key[:], flip)
		ext[FieldAccessKey] = "ak" + string(key[:])
		if VerifySignature(ext, body, secret) {
			t.Fatal("verified with a changed access key")
		}
	})
}
