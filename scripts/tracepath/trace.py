"""gdb script for scripts/tracepath.sh: a breakpoint on every function in
$TRACE_SYMS that logs (time, thread, function, file) to $TRACE_OUT and lets
the program go on."""
import gdb, os, time
syms = [l.strip() for l in open(os.environ["TRACE_SYMS"]) if l.strip()]
out = open(os.environ["TRACE_OUT"], "w", buffering=1)
class B(gdb.Breakpoint):
    def stop(self):
        try:
            f = gdb.selected_frame()
            sal = f.find_sal()
            fn = sal.symtab.filename if sal.symtab else "?"
            out.write("%f\t%d\t%s\t%s\n" % (time.time(), gdb.selected_thread().ptid[1], self.location, fn))
        except Exception as e:
            out.write("ERR %s\n" % e)
        return False
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set print thread-events off")
n = 0
for s in syms:
    try:
        B("'" + s + "'", internal=True)
        n += 1
    except Exception as e:
        pass
out.write("# %d breakpoints\n" % n)
