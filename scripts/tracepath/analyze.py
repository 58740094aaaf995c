"""Reads scripts/tracepath.sh's traces: per window (the first write, the
undo in the daemon, the undo's client), the packages and files entered in
order, and the package crossings, all and back up the import order."""
import sys, re, collections
TOP = "cmd|fs|rewind|blobstore|eventlog|record|history|control|internal|hooks|mcpserver|timeline|daemon|replicate|bisect|merge"
def relpath(f):
    """f relative to the module's root (the trees differ: before, after)."""
    return re.sub(r'^.*?/(?=(' + TOP + r')/)', '', f)
def pkg_of(fn):
    m = re.match(r'github\.com/zerofs/zerofs/(.+?)\.(\(|[A-Za-z_])', fn)
    if fn.startswith('main.'): return 'cmd/zerofs'
    p = m.group(1) if m else fn
    return p
LAYER = {'cmd/zerofs':0,'main':0,'fs':1,'timeline':1,'mcpserver':1,'daemon':1,'bisect':1,'hooks':1,'history':2,'replicate':2,'control':3,'merge':3.5,'rewind':4,'rewind/internal/index':4.5,'eventlog':5,'blobstore':5,'record':7}
def layer(p):
    if p.startswith('internal/'): return 6
    return LAYER.get(p, 6)
def load(path, lo, hi, main_only=None):
    rows=[]
    for l in open(path):
        if l.startswith('#') or l.startswith('ERR'): continue
        t, tid, fn, f = l.rstrip('\n').split('\t')
        t=float(t)
        if t<lo or t>hi: continue
        if '.init' in fn: continue
        rows.append((t,int(tid),fn,f))
    return rows
def report(name, rows):
    # collapse consecutive duplicate function on same thread (morestack re-entry)
    out=[]; last={}
    for t,tid,fn,f in rows:
        if last.get(tid)==fn: continue
        last[tid]=fn; out.append((t,tid,fn,f))
    fns=[r[2] for r in out]
    pk=[pkg_of(fn) for fn in fns]
    files=[relpath(r[3]) for r in out]
    # file sequence collapsed
    fseq=[]
    for p,f in zip(pk,files):
        key=f if f!='?' else p+'/?'
        if not fseq or fseq[-1]!=key: fseq.append(key)
    pseq=[]
    for p in pk:
        if not pseq or pseq[-1]!=p: pseq.append(p)
    ups=sum(1 for a,b in zip(pseq,pseq[1:]) if layer(b)<layer(a))
    # per thread: crossings and trips back up within one thread's entries
    bythread=collections.defaultdict(list)
    for r in out: bythread[r[1]].append(pkg_of(r[2]))
    tc=tu=0
    for tid,ps in bythread.items():
        q=[]
        for p in ps:
            if not q or q[-1]!=p: q.append(p)
        tc+=len(q)-1; tu+=sum(1 for a,b in zip(q,q[1:]) if layer(b)<layer(a))
    perthread="per thread: %d package crossings, %d back up" % (tc,tu)
    print("== %s: %d function entries (%d threads), %d distinct functions, %d packages, %d files" % (name, len(out), len(set(r[1] for r in out)), len(set(fns)), len(set(pk)), len(set(files))))
    print("package crossings %d, of them back up (to a package higher in the import order) %d; %s" % (len(pseq)-1, ups, perthread))
    print("packages in order of first entry:", " -> ".join(dict.fromkeys(pk)))
    print("files in order of first entry:", " ".join(dict.fromkeys(f for f in files if f!='?')))
    print("package sequence (collapsed):", " ".join(pseq))
if __name__=='__main__':
    d=sys.argv[1]
    marks={}
    for l in open(d+'/marks'):
        _,k,v=l.split(); marks[k]=float(v)
    rows=load(d+'/daemon.trace', marks['write-start'], marks['write-end'])
    report('first write (daemon)', rows)
    rows=load(d+'/daemon.trace', marks['undo-start'], marks['undo-end'])
    report('undo (daemon)', rows)
    rows=load(d+'/client.trace', 0, 1e12)
    i=next(i for i,r in enumerate(rows) if r[2]=='main.main')
    rows=rows[i:]
    report('undo (client: zerofs undo)', rows)
