// Package control is the protocol of the control directory ".zero/" at a
// mount's root: the file names, what a write to each one asks for, and what
// a read of each one reports. The daemon (package fs) parses requests and
// formats reports with it, and every client (package history, and through
// it the CLI) formats requests and parses reports with it, so the two sides
// cannot drift apart.
//
// The files (SPEC.md, "Inside the mount"):
//
//	step    write a label (one line; a JSON object is the tool_call's payload,
//	        labelled by its "name"): begin a step. Read: "<seq> <label>\n".
//	rewind  write a request (below): roll back. Read: a RewindReport (JSON),
//	        "{}" before any rewind.
//	head    read the head sequence: "<seq>\n".
//	log     read the event log (JSON lines).
//	status  read a Status (JSON).
//	gc      write a sequence: forget the states before it. Read: a GCReport
//	        (JSON), "{}" before any gc.
//	turn    write a turn event's payload (JSON): a person's prompt began a turn.
//	result  write a tool_result's payload (JSON, record.ToolResultPayload): what came
//	        of a step's tool call. Read, through the handle that wrote it: a
//	        ResultReport, or the Refusal (no step matches it).
//
// A rewind request is one of
//
//	42                                   the whole workspace to sequence 42
//	{"target": 42}                       the same
//	{"target": 42, "paths": ["a/b.go"]}  only those paths (SPEC's form)
//	{"revert": 42}                       undo the step at 42, keep later changes
//	{"revert": 42, "force": true}        even over later changes to its paths
//	{"undo": true}                       undo the last step still in effect
//	{"redo": true}                       undo the last undo
//	{"turn": 42}                         take back the turn at 42 and all after it
//	{"undo": true, "turn": true}         take back the whole turn of what undo would
//
// any of them with "dryRun": true (report and preview, change nothing) and
// "session": "<agent session id>" (whose changes count as the agent's).
//
// Names are bytes and JSON strings are UTF-8: a path that is not valid
// UTF-8 goes as its readable form in "paths" and its exact bytes, base64,
// at the same position of "pathsBytes" ("" for a path that is UTF-8), as
// the event log's pathBytes. A request whose text is not UTF-8 is refused:
// encoding/json would read each odd byte as U+FFFD, another name. Reports
// carry names the same way (pathsBytes, conflictsBytes, skippedBytes, and
// pathBytes in a preview's or a foreign change's entry).
//
// Undo and redo are resolved by the engine under its workspace lock, so no
// change or step can land between choosing the target and rewinding to it,
// and two concurrent undos undo two different steps. A handle that made a
// request reads that request's own report, whatever other clients did
// meanwhile: open the file read-write, write the request as one line (the
// daemon runs it at its newline), read the report, whole. A refused
// request's report carries its Refusal ("error": nothing-to-undo,
// nothing-to-redo, no-turn, no-such-seq, pruned, thinned, conflict,
// bad-request, failed, with details), on .zero/gc and .zero/step too (a step runs when a
// descriptor is closed: close a duplicate, then read).
//
// This package holds no state and does no I/O; nothing in it is durable.
package control
