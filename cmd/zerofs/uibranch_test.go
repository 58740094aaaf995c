package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestTimelineMergeInBrowser merges a fork's two steps into a mounted
// workspace and reads the timeline in a real Chromium: the merge is an
// entry of its own, marked "merge", that names where its changes came
// from (the directory and the state of this workspace it began at) and
// lists the steps it brought in, numbered and labelled as that side's own
// log has them, and the file merged line by line.
func TestTimelineMergeInBrowser(t *testing.T) {
	chrome := needChromium(t)
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws, fork := filepath.Join(dir, "ws"), filepath.Join(dir, "fork")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "1\n2\n3\n4\n5\n")
	mountT(t, ws)
	head := readTrim(t, filepath.Join(ws, ".zero/head"))
	binOK(t, ws, "fork", head, fork)
	mountT(t, fork)
	binOK(t, ws, "step", "ours edit")
	sh(t, ws, `sed -i 's/^1$/ONE/' a.txt`)
	binOK(t, fork, "step", "Edit the end")
	sh(t, fork, `sed -i 's/^5$/FIVE/' a.txt`)
	binOK(t, fork, "step", "Add <b>notes</b>")
	sh(t, fork, `echo new > notes.txt`)
	binOK(t, ws, "merge", fork)

	u, _ := startUI(t, ws)
	ctx := browserT(t, chrome)
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
	merge := `[...document.querySelectorAll(".entry.rewind")].find(e => e.querySelector(".badge.merge"))`
	pollJS(t, ctx, "the merge's entry", merge+` && `+merge+`.querySelector(".merge-steps")`)
	type seen struct {
		Badge, From, Head, Lines string
		Steps                    []string
		Files                    []string
	}
	js := fmt.Sprintf(`(() => { const e = %s; return {
		Badge: e.querySelector(".badge").textContent,
		From: e.querySelector(".merge-from").textContent,
		Head: e.querySelector(".merge-head").textContent,
		Lines: (e.querySelector(".merge-lines") || {}).textContent || "",
		Steps: [...e.querySelectorAll(".merge-step")].map(s => s.textContent),
		Files: [...e.querySelectorAll(".file .path")].map(p => p.textContent) } })()`, merge)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[seen](js))
	if err != nil {
		t.Fatal(err)
	}
	if got.Badge != "merge" {
		t.Errorf("badge %q, want merge", got.Badge)
	}
	if want := "from the fork " + fork + ", which began at #" + head + " of this workspace"; got.From != want {
		t.Errorf("from: %q, want %q", got.From, want)
	}
	if got.Head != "brought in its 2 steps" || len(got.Steps) != 2 ||
		!strings.HasSuffix(got.Steps[0], "Edit the end") || !strings.HasSuffix(got.Steps[1], "Add <b>notes</b>") ||
		!strings.HasPrefix(got.Steps[0], "#") {
		t.Errorf("steps: %q %q", got.Head, got.Steps)
	}
	if got.Lines != "merged line by line: a.txt" {
		t.Errorf("lines: %q", got.Lines)
	}
	if strings.Join(got.Files, " ") != "a.txt notes.txt" {
		t.Errorf("files: %q", got.Files)
	}
	// The step labels are text, never markup.
	if bold, err := chromedp.Run(ctx, chromedp.Evaluate[int](merge+`.querySelectorAll("b").length`)); err != nil || bold != 0 {
		t.Error("a label became markup")
	}
}

// TestTimelineBranchesInBrowser reads a workspace's branches in the
// timeline in a real Chromium: each branch with its directory, the state
// of this workspace it began from, mounted or not, and what it holds (a
// branch that changed a path: not merged; one that changed nothing: no
// changes); a merge of the first shows it merged, as the merge's
// sequence, and the merge's entry names the branch and its step (a second
// merge, the first merge and only the step since); a deleted branch leaves the list, and with no branch left the
// list is gone.
func TestTimelineBranchesInBrowser(t *testing.T) {
	chrome := needChromium(t)
	built.NeedFUSE(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	writeFile(t, filepath.Join(ws, "a.txt"), "1\n2\n3\n")
	mountT(t, ws)
	one, two := filepath.Join(dir, "try-1"), filepath.Join(dir, "try-2")
	t.Cleanup(func() {
		for _, d := range []string{one, two} {
			if _, err := os.Stat(d); err == nil {
				bin(t, ws, "", "branch", "--delete", d, "--force")
			}
		}
	})
	binOK(t, ws, "branch", one, two)
	base := branchList(t, ws)[0].Base
	binOK(t, one, "step", "Edit a.txt")
	sh(t, one, `sed -i 's/^3$/three/' a.txt`)

	u, _ := startUI(t, ws)
	ctx := browserT(t, chrome)
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatal(err)
	}
	row := func(d string) string {
		return fmt.Sprintf(`[...document.querySelectorAll("#branch-list .branch")].find(b => b.dataset.dir === %q)`, d)
	}
	text := func(d string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](row(d)+`.textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pollJS(t, ctx, "both branches listed", `!document.querySelector("#branches").hidden && `+row(one)+` && `+row(two))
	if got, want := text(one), one+fmt.Sprintf("from #%d", base)+"mounted1 changed path, not merged"; got != want {
		t.Errorf("the changed branch reads %q, want %q", got, want)
	}
	if got, want := text(two), two+fmt.Sprintf("from #%d", base)+"mountedno changes"; got != want {
		t.Errorf("the unchanged branch reads %q, want %q", got, want)
	}
	binOK(t, ws, "merge", one)
	merged := branchList(t, ws)[0].Merged
	pollJS(t, ctx, "the merged branch shown merged", fmt.Sprintf(`%s && %s.querySelector(".branch-state").textContent === "merged as #%d"`, row(one), row(one), merged))
	// The merge's entry says it came from the branch, and what it brought.
	mergeEntry := fmt.Sprintf(`[...document.querySelectorAll(".entry.rewind")].find(e => e.querySelector(".badge.merge") && e.dataset.seq === "%d")`, merged)
	pollJS(t, ctx, "the branch's merge in the history", mergeEntry)
	info, err := chromedp.Run(ctx, chromedp.Evaluate[string](mergeEntry+`.querySelector(".merge-info").textContent`))
	if want := "from the branch " + one + fmt.Sprintf(", which began at #%d of this workspace", base); err != nil || !strings.HasPrefix(info, want) || !strings.Contains(info, "Edit a.txt") {
		t.Errorf("the merge entry says %q, want %q and the branch's step", info, want)
	}
	// Merged again after more work: the entry says what it brings is
	// what the branch did since the first merge.
	binOK(t, one, "step", "Edit a.txt again")
	sh(t, one, `sed -i 's/^1$/one/' a.txt`)
	binOK(t, ws, "merge", one)
	again := branchList(t, ws)[0].Merged
	second := fmt.Sprintf(`[...document.querySelectorAll(".entry.rewind")].find(e => e.querySelector(".badge.merge") && e.dataset.seq === "%d")`, again)
	pollJS(t, ctx, "the second merge in the history", second)
	info, err = chromedp.Run(ctx, chromedp.Evaluate[string](second+`.querySelector(".merge-info").textContent`))
	n, nerr := chromedp.Run(ctx, chromedp.Evaluate[int](second+`.querySelectorAll(".merge-step").length`))
	if want := fmt.Sprintf(", merged before as #%d: what it did since", merged); err != nil || nerr != nil || !strings.Contains(info, want) ||
		!strings.Contains(info, "Edit a.txt again") || n != 1 {
		t.Errorf("the second merge entry says %q (%d steps), want %q and only the new step", info, n, want)
	}
	binOK(t, ws, "branch", "--delete", one)
	binOK(t, ws, "branch", "--delete", two)
	pollJS(t, ctx, "the deleted branches gone", `document.querySelector("#branches").hidden && !`+row(one))
}
