package fs

import (
	"context"
	"syscall"

	"github.com/zerofs/zerofs/control"
)

// doResult records a tool_result (control.ParseResult reads the request):
// what came of a step's tool call. The handle that wrote it reads the
// event's sequence and step (control.ResultReport), or why none was
// recorded: a bad request is EINVAL, a result no step matches ENOENT.
func (f *fsys) doResult(ctx context.Context, data []byte) ([]byte, syscall.Errno) {
	r, err := control.ParseResult(data)
	if err != nil {
		out, _ := control.JSONLine(control.ResultReport{Refusal: control.RefusalOf(err)})
		return out, syscall.EINVAL
	}
	r, ev, err := f.eng.RecordResult(engineCtx(ctx), r)
	if err != nil {
		out, _ := control.JSONLine(control.ResultReport{Refusal: control.RefusalOf(err)})
		return out, engineErrno(f.log, "result", ".zero/result", err, seqInvalid)
	}
	out, _ := control.JSONLine(control.ResultReport{Sequence: ev.Seq, Step: r.Step})
	return out, 0
}
