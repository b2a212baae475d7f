# decompress every *.xz given (python's lzma: no xz binary needed), keep the mode executable
import lzma, os, sys
for p in sys.argv[1:]:
    out = p[:-3]
    with lzma.open(p) as f, open(out, "wb") as o:
        o.write(f.read())
    os.chmod(out, 0o755)
    os.remove(p)
