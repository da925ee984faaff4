"""GPU probe for the copy kernels: does the rate depend on where the destination lies
relative to the source (DRAM placement) or on the kernel?

Times ``primitives.copy(src, dst)`` with the source aligned (``x``) or 4 bytes past a
boundary (``x[1:]``) into destinations at several byte offsets inside one big buffer, for a
few copy tuning configurations (set in-process), next to ``cudaMemcpyAsync`` of the same
bytes between the same pointers, and the bench's pattern (``primitives.copy(x)`` into a
freshly allocated array). Run on the GPU machine (about 10-20 s on an H200):

    python scripts/probe_copy.py [--sizes 1e8,1e9] [--reps 15]

Columns: median µs of our kernel per configuration, then memcpy's, and ours / memcpy.
"""

from __future__ import annotations

import argparse
import importlib

CONFIGS = {
    "capped v4": {"one_pass": False, "vecs": 4},
    "one-pass v2": {"one_pass": True, "vecs": 2},
    "one-pass v1": {"one_pass": True, "vecs": 1},
}
#: destination offsets in bytes from the start of the destination buffer (16-byte multiples)
DST_OFFSETS = (0, 16, 512, 4096, 65536, 1 << 20, (2 << 20) + 256)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1e8,1e9")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args(argv)
    import cupy as cp

    from bench.hosttime import event_us
    from forge_array import primitives
    from forge_array.runtime import tuning

    pcopy = importlib.import_module("forge_array.primitives.copy")

    def use(cfg):
        tuning.OVERRIDES["copy"] = dict(cfg)
        tuning._CACHE.clear()
        pcopy._PLANS.clear()

    def gpu_us(fn):
        for _ in range(2):
            fn()
        return event_us(fn, args.reps)

    names = list(CONFIGS)
    print(f"{'case':44s} " + " ".join(f"{c:>12s}" for c in names) + f" {'memcpy':>9s}  best/memcpy")
    for n in (int(float(s)) for s in args.sizes.split(",")):
        pad = DST_OFFSETS[-1] // 4 + 64
        src_buf = cp.random.random(n + 64, dtype=cp.float32)
        dst_buf = cp.empty(n + pad, dtype=cp.float32)
        for src_label, src in (("x", src_buf[:n]), ("x[1:]", src_buf[1:n + 1])):
            rows = [("fresh out (bench pattern)", None)] + [(f"dst +{off} B", off) for off in DST_OFFSETS]
            for label, off in rows:
                times = []
                for c in names:
                    use(CONFIGS[c])
                    if off is None:
                        times.append(gpu_us(lambda: primitives.copy(src)))
                    else:
                        dst = dst_buf[off // 4:off // 4 + n]
                        times.append(gpu_us(lambda: primitives.copy(src, dst)))
                        assert bool((dst[-1000:] == src[-1000:]).all())
                if off is None:
                    out = cp.empty(n, dtype=cp.float32)
                    d_ptr = out.data.ptr
                else:
                    d_ptr = dst_buf.data.ptr + off
                s_ptr, nbytes = src.data.ptr, 4 * n
                stream = cp.cuda.get_current_stream().ptr
                mc = gpu_us(lambda: cp.cuda.runtime.memcpyAsync(d_ptr, s_ptr, nbytes, 3, stream))
                if off is None:
                    del out
                case = f"n={n:.0e} {src_label} -> {label}"
                print(f"{case:44s} " + " ".join(f"{t:12.1f}" for t in times) + f" {mc:9.1f}  {mc / min(times):.3f}",
                      flush=True)
        del src_buf, dst_buf
        cp.get_default_memory_pool().free_all_blocks()
    use({})


if __name__ == "__main__":
    main()
