#!/usr/bin/env python3
# scripts/nmtree.py DIR: a node_modules-like tree in DIR/node_modules, made the
# same way every time: 1,737 files, about 46 MB, in packages of package.json,
# sources and a few large bundles (scripts/bench-session.sh unpacks it).
import os, random, sys
if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
    sys.exit("usage: scripts/nmtree.py DIR")
root = os.path.join(sys.argv[1], "node_modules")
rng = random.Random(1737)
total, files, pkg = 46_000_000, 1737, 0
sizes = [rng.lognormvariate(8.5, 1.6) for _ in range(files)]
scale = total / sum(sizes)
made = 0
while made < files:
    pkg += 1
    d = os.path.join(root, f"pkg{pkg:03d}")
    os.makedirs(os.path.join(d, "lib"), exist_ok=True)
    for j in range(min(rng.randint(3, 25), files - made)):
        name = "package.json" if j == 0 else ("index.js" if j == 1 else f"lib/m{j}.js")
        with open(os.path.join(d, name), "wb") as f:
            f.write(rng.randbytes(max(1, int(sizes[made] * scale))))
        made += 1
