// Package merge is the three-way merge of two sides that grew from one
// base state: a workspace and a fork (or, later, a branch) of it.
//
// It decides, path by path, what the merged tree holds, and merges text
// files line by line. It reads nothing itself: callers give each path's
// three states (Node) and, for the text merges, a way to read content.
// It imports only the standard library, so the engine and tests share it.
//
// Per path, against the base:
//   - changed only on their side: theirs is taken;
//   - changed only on ours, or the same change on both: ours is kept;
//   - changed on both: a file's content, mode and each extended attribute
//     merge separately (an attribute changed on one side only is taken
//     from that side); two text files' contents merge line by line when
//     their changes do not overlap (Lines: git merge-file's rules);
//     anything else is a Conflict.
//
// A rename is a delete of the old path and an add of the new one. A
// directory removed on one side while the other side keeps or adds
// anything beneath it is a conflict on the directory. Owners and
// modification times are not compared: a fork's files are its creator's,
// written when it was made.
package merge
