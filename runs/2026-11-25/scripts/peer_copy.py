"""Copy-engine bandwidth between the two GPUs, the ceiling issue 33 asks the
fast kernel to be measured against on H100: cudaMemcpyPeerAsync through
PyTorch's cross-device copy_, 512 MiB, one direction at a time and both at
once, and the same-GPU device-to-device copy for reference. Best of 5 timed
rounds of 10 copies each after 3 warm-ups; bytes counted once (what crosses
the link), not read+write."""
import time, torch

N = 512 << 20
assert torch.cuda.device_count() >= 2, "needs 2 GPUs"
print("devices:", [torch.cuda.get_device_name(i) for i in range(2)])
print("peer access 0->1:", torch.cuda.can_device_access_peer(0, 1),
      "1->0:", torch.cuda.can_device_access_peer(1, 0))
a = [torch.randint(0, 255, (N,), dtype=torch.uint8, device=f"cuda:{i}") for i in range(2)]
b = [torch.empty(N, dtype=torch.uint8, device=f"cuda:{i}") for i in range(2)]
s = [torch.cuda.Stream(device=i) for i in range(2)]

def timed(pairs, reps=10):
    """pairs: (dst, src, stream). Best GB/s per direction over 5 rounds."""
    best = 0.0
    for rnd in range(8):
        for d in range(2):
            torch.cuda.synchronize(d)
        t = time.perf_counter()
        for _ in range(reps):
            for dst, src, st in pairs:
                with torch.cuda.stream(st):
                    dst.copy_(src, non_blocking=True)
        for d in range(2):
            torch.cuda.synchronize(d)
        dt = time.perf_counter() - t
        if rnd >= 3:
            best = max(best, N * reps / dt / 1e9)
    return best

print(f"GPU0->GPU1   {timed([(b[1], a[0], s[0])]):7.1f} GB/s")
print(f"GPU1->GPU0   {timed([(b[0], a[1], s[1])]):7.1f} GB/s")
print(f"both at once {timed([(b[1], a[0], s[0]), (b[0], a[1], s[1])]):7.1f} GB/s per direction")
print(f"GPU0 local   {timed([(b[0], a[0], s[0])]):7.1f} GB/s (bytes copied; x2 for read+write)")
assert torch.equal(b[0], a[0]), "local copy wrong"
b[1].copy_(a[0]); assert torch.equal(b[1].cpu(), a[0].cpu()), "peer copy wrong"
print("copies checked")
