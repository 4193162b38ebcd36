package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"slices"
	"sort"
)

// Ext field names of RocketMQ's ACL hook.
const (
	FieldAccessKey     = "AccessKey"
	FieldSignature     = "Signature"
	FieldSecurityToken = "SecurityToken"
)

// SignedContent returns what a RocketMQ client signs: the values of the
// ext fields sorted by key, Signature (and the keys in skip) left out,
// concatenated, then the body (AclUtils.combineRequestContent).
func SignedContent(ext map[string]string, body []byte, skip ...string) []byte {
	keys := make([]string, 0, len(ext))
	n := len(body)
outer:
	for k, v := range ext {
		if k == FieldSignature {
			continue
		}
		for _, s := range skip {
			if k == s {
				continue outer
			}
		}
		keys = append(keys, k)
		n += len(v)
	}
	sort.Strings(keys)
	out := make([]byte, 0, n)
	for _, k := range keys {
		out = append(out, ext[k]...)
	}
	return append(out, body...)
}

// Sign returns Base64(HmacSHA1(secret, content)), RocketMQ's Signature.
func Sign(secret, content []byte) string {
	m := hmac.New(sha1.New, secret)
	m.Write(content)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SignRequest adds AccessKey and Signature to ext as a RocketMQ client
// does (tests and tools use it).
func SignRequest(ext map[string]string, body []byte, accessKey string, secret []byte) {
	ext[FieldAccessKey] = accessKey
	delete(ext, FieldSignature)
	ext[FieldSignature] = Sign(secret, SignedContent(ext, body))
}

// FieldUniqueKeyQuery is the flag the Java client adds to a query by
// unique key after signing it; RocketMQ's broker (up to 4.9.3 clients)
// leaves it out of the signed content.
const FieldUniqueKeyQuery = "_UNIQUE_KEY_QUERY"

// VerifySignature reports whether ext's Signature is the one secret makes
// of the request. The Java client signs SecurityToken when it sends one;
// rocketmq-client-go sends it without signing it; both are accepted, as is
// a signature without FieldUniqueKeyQuery. The comparison takes the same
// time wherever the signatures differ.
func VerifySignature(ext map[string]string, body []byte, secret []byte) bool {
	got := []byte(ext[FieldSignature])
	if len(got) == 0 {
		return false
	}
	if subtle.ConstantTimeCompare(got, []byte(Sign(secret, SignedContent(ext, body)))) == 1 {
		return true
	}
	_, token := ext[FieldSecurityToken]
	_, uniq := ext[FieldUniqueKeyQuery]
	for _, skip := range [][]string{{FieldSecurityToken}, {FieldUniqueKeyQuery}, {FieldSecurityToken, FieldUniqueKeyQuery}} {
		if (!token && slices.Contains(skip, FieldSecurityToken)) || (!uniq && slices.Contains(skip, FieldUniqueKeyQuery)) {
			continue
		}
		if subtle.ConstantTimeCompare(got, []byte(Sign(secret, SignedContent(ext, body, skip...)))) == 1 {
			return true
		}
	}
	return false
}
