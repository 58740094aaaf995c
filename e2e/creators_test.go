package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// creatorScript creates new-1.txt, new-2.txt, ... with `printf x >` until
// the file $1 exists, reports each failure on stderr as "FAIL new-i.txt:
// <the shell's message>", and ends by printing "DONE <count>".
const creatorScript = `
stop=$1; i=0; err=$(mktemp)
while [ ! -e "$stop" ]; do
	i=$((i+1))
	if ! { printf x > new-$i.txt; } 2>"$err"; then
		echo "FAIL new-$i.txt: $(cat "$err")" >&2
	fi
done
rm -f "$err"
echo "DONE $i"
`

// TestCreatorsWaitForRewinds: two shells create files in a loop, the same
// names one after the other (one creates new-i.txt, the other truncates
// it or creates it), while rewinds run one after another, each removing
// the files created since its target. SPEC: writers wait for a rewind;
// none of their calls fails. (On 66d441b a few creates in a thousand
// failed with ENOENT: the kernel still had new-i.txt, which the rewind had
// just removed, and the open that waited for the rewind found it gone.)
func TestCreatorsWaitForRewinds(t *testing.T) {
	ws := mountT(t)
	const creators, rewinds = 2, 20
	stop := filepath.Join(t.TempDir(), "stop")
	step(t, ws, "start")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		stdout, stderr string
		err            error
	}
	done := make(chan result, creators)
	for range creators {
		cmd := exec.CommandContext(ctx, "bash", "-c", creatorScript, "creator", stop)
		cmd.Dir = ws
		cmd.WaitDelay = 5 * time.Second
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			err := cmd.Wait()
			done <- result{out.String(), errOut.String(), err}
		}()
	}
	stopOnce := func() {
		if _, err := os.Stat(stop); err != nil {
			if err := os.WriteFile(stop, nil, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	defer stopOnce()

	waitProgress := func() {
		t.Helper()
		h0 := head(t, ws)
		if err := poll(30*time.Second, func() bool { return head(t, ws) >= h0+20 }); err != nil {
			t.Fatalf("head stayed near %d for 30 s: the creators are stuck", h0)
		}
	}
	var heads []int64
	for r := range rewinds {
		waitProgress()
		heads = append(heads, step(t, ws, fmt.Sprintf("round %d", r)))
		waitProgress()
		rewindTo(t, ws, heads[max(0, len(heads)-2)])
	}
	stopOnce()

	total, failed := 0, 0
	for range creators {
		select {
		case r := <-done:
			if r.err != nil {
				t.Errorf("creator: %v\n%s", r.err, r.stderr)
			}
			n, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "DONE ")
			k, err := strconv.Atoi(n)
			if !ok || err != nil {
				t.Errorf("creator printed %q, want DONE <count>", r.stdout)
			}
			total += k
			for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if line == "" {
					continue
				}
				if failed++; failed <= 10 {
					t.Errorf("%s", line)
				}
			}
		case <-ctx.Done():
			t.Fatal("creators did not finish in time: deadlock?")
		}
	}
	t.Logf("%d creates during %d rewinds, %d failed", total, rewinds, failed)
	if failed > 0 {
		t.Errorf("%d of %d creates failed while rewinds ran; want none", failed, total)
	}
}
