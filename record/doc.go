// Package record holds the words of zerofs's contract (SPEC.md, Words and
// Events): the event envelope, the event types and their payloads as the
// log holds them, the sequence, the kinds of a path, the forms of a rewind,
// the rewind request with what comes of it and why one is refused, the
// names a workspace reserves and what makes a path clean, how a name that
// is not UTF-8 travels in JSON, and the check that tells a record zerofs
// could have written from a damaged one.
//
// It imports nothing of zerofs: the engine (rewind), the log (eventlog),
// the control protocol, the clients (history, replicate) and the front
// ends all speak these words, and none has to import another to do so.
//
// Everything read from a store is untrusted input (SPEC, Trust): a payload
// is parsed by DecodeEvent and a checkpoint's records checked by
// CheckEvent before anyone uses them.
package record
