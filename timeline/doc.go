// Package timeline is `zerofs ui`: a local web page that shows a
// workspace's history as a timeline for people, newest first, and runs
// rewinds, reverts and path rewinds from it, each previewed first. It is
// an http.Handler over a function that opens a history.Source; everything
// it shows or does goes through package history (Blocks, Changes, Diff,
// Source.Rewind), so the page, the CLI and the MCP server agree.
//
// The source is opened per request and closed before the response is
// written: an unmounted workspace's store lock is held only while a
// request runs, and requests that open it are serialised. When the
// workspace is mounted, everything goes through the mount.
//
// Security: the page is for the user who started it, on this machine.
// Every API request must carry the server's random token in an
// X-Zerofs-Token header, else 403; a cookie or a query parameter counts
// for nothing, and the server sets no cookie. The token reaches the page
// in the URL's fragment (#token=, see URL), which browsers send to no
// server; the page keeps it in its tab's sessionStorage, which no other
// origin (another port of 127.0.0.1 included) can read. The page itself
// (HTML, script, styles, the same for everyone) needs no token. A request
// whose Host is not one of the listening addresses, or whose Origin is
// another site, is refused with 403 too, so a web page
// elsewhere cannot reach the server through DNS rebinding or a cross-site
// form. Actions are POSTs of JSON only.
//
// API (JSON): GET /api/head; GET /api/log?before=SEQ&limit=N (entries
// with a sequence below SEQ, newest first, at most N, default 50); GET
// /api/diff?a=SEQ&b=SEQ&path=P...; POST /api/rewind with a rewind request
// as package control parses it ({"target":N,"paths":[...]},
// {"revert":N}, {"undo":true}, with "dryRun":true for the preview); GET
// /api/branches (the workspace's branches, from Options.Branches: package
// branch lists them, and the timeline mounts nothing).
//
// Durability: nothing here writes; a rewind is durable when the Source's
// Rewind returns, before the response is sent.
//
// Imports: history, control, rewind, eventlog; never fs or cmd.
package timeline
