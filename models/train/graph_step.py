"""A training step's forward, loss and backward replayed as one CUDA graph per batch shape.

Why: the step is launch-bound. bench_step.py --profile (piece 4's run) counted 8,558 kernel launches per
step at 300 x 400 frames and 24,832 at 80 x 1200 (each LSTM time step is ~12 small kernels forward and
backward, the loss's lattice a few per frame), with the device busy for only 54% / 26% of the step: the
host's ~15 us per launch, not the arithmetic, sets the pace. A CUDA graph replays all of them with one
launch. A graph needs fixed shapes and addresses, so batches come in a few fixed shapes
(FeaturePool.bucket_batches: B, T, U per length bucket, short batches filled with weight-0 dummies) and
each shape's inputs live in static tensors that every batch of that shape is copied into.

What is captured: zeroing the gradients, the forward, the loss and the backward (the gradients land in
the parameters' .grad tensors, allocated once before the first capture and never set to None). The
gradient clipping, the finiteness check and AdamW run eagerly after the replay (a few foreach kernels),
so a non-finite step can still be skipped. The first batch of each shape runs eagerly on a side stream
(it is a real training step and the warm-up capture needs), then the shape is captured; all shapes share
one memory pool (they never run concurrently, and nothing but the loss outlives a replay).

The graph replays exactly the kernels of the eager step (same code, same order), so the numbers are
those of the eager step up to the non-determinism the kernels already have; tests/train/test_graph_step.py
holds the bucketing and the weighted loss to the plain batch on the CPU (no graphs there).
"""
import time
import traceback

import torch


class GraphedStep:
    """step(feats, flen, labels, ulen, weight) -> loss (0-dim tensor), gradients in the parameters' .grad.

    compute(feats, flen, labels, ulen, weight) -> loss is the eager step's forward and loss; shapes are
    taken from the inputs. With enabled=False (or off CUDA) every call runs eagerly (same semantics:
    gradients are zeroed, not accumulated)."""

    def __init__(self, model, compute, enabled=True, max_graphs=64, log=None, max_reserved_frac=0.75,
                 shared_warmup_stream=True):
        self.model = model
        self.compute = compute
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.enabled = enabled and torch.cuda.is_available() and self.params[0].is_cuda
        self.max_graphs = max_graphs
        self.graphs = {}          # shape key -> (graph, static inputs, static loss)
        self.failed = {}          # shape key -> why its capture failed (then it runs eagerly)
        self.pool = None
        self.log = log or (lambda rec: None)
        self.replays = self.eager = 0
        self.capture_s = 0.0      # time spent capturing (beside the first, eager step of each shape)
        # Piece 11 died taking in a shard while the graphs' pool held 61.6 GiB for 13 shapes: once the
        # allocator holds more than this fraction of the device after a capture, every graph is dropped
        # (release) and shapes are captured again as they come
        self.max_reserved_frac = max_reserved_frac
        self.releases = 0
        # The caching allocator reuses a freed block only for allocations on the stream it was made on: the
        # warm-up step of each new shape ran on a new side stream, so its blocks (up to a step's peak, 12-19
        # GiB for en-char-medium) stayed cached for a stream nobody uses again, counted in memory_reserved()
        # until the next release. shared_warmup_stream=True (the default) runs every warm-up on one stream
        # instead: measured on the H100 (models/train/results/graph-pool-ab-h100/, pieces l7-l8 in
        # models/README.md), 0 releases over en-char-medium's 19 shapes and 2-7 per training piece against 33-49.
        self.shared_warmup_stream = shared_warmup_stream
        self.side = None
        for p in self.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)

    def release(self, why=""):
        """Drops every captured graph and their memory pool and empties the allocator's cache (the
        .grad tensors stay). Later steps capture their shapes again. Returns the bytes given back."""
        n = len(self.graphs)
        before = torch.cuda.memory_reserved() if self.enabled else 0
        for graph, _static, _loss in self.graphs.values():
            graph.reset()
        self.graphs.clear()
        self.pool = None
        if self.enabled:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        freed = before - (torch.cuda.memory_reserved() if self.enabled else 0)
        self.releases += 1
        self.log({"event": "graphs_released", "why": why, "graphs": n, "freed_gib": round(freed / 2 ** 30, 2),
                  "releases": self.releases})
        return freed

    def _zero_grads(self):
        for p in self.params:        # a graph captured the .grad tensors' addresses: never None
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        torch._foreach_zero_([p.grad for p in self.params])

    def _eager(self, inputs):
        self._zero_grads()
        loss = self.compute(*inputs)
        loss.backward()
        self.eager += 1
        return loss.detach()

    def __call__(self, feats, flen, labels, ulen, weight):
        inputs = (feats, flen, labels, ulen, weight)
        if not self.enabled:
            return self._eager(inputs)
        key = tuple(tuple(t.shape) for t in inputs) + (feats.dtype,)
        entry = self.graphs.get(key)
        if entry is not None:
            graph, static, loss = entry
            for s, x in zip(static, inputs):
                s.copy_(x, non_blocking=True)
            graph.replay()
            self.replays += 1
            return loss.clone()
        if key in self.failed or len(self.graphs) >= self.max_graphs:
            return self._eager(inputs)
        # First batch of this shape: a real step, eagerly on a side stream (the warm-up a capture
        # needs: cuBLAS workspaces, autograd's device thread), then the capture.
        if not self.shared_warmup_stream:
            side = torch.cuda.Stream()
        else:
            if self.side is None:
                self.side = torch.cuda.Stream()
            side = self.side
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = self._eager(inputs)
        torch.cuda.current_stream().wait_stream(side)
        grads = [p.grad.clone() for p in self.params]    # the capture below does not run, but keep them
        t0 = time.perf_counter()
        static = [x.clone() for x in inputs]
        graph = torch.cuda.CUDAGraph()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        try:
            with torch.cuda.graph(graph, pool=self.pool):
                torch._foreach_zero_([p.grad for p in self.params])
                loss = self.compute(*static)
                loss.backward()
                loss = loss.detach()
        except Exception as e:     # noqa: BLE001 - any capture failure: this shape stays eager
            where = [ln.strip() for ln in traceback.format_exc().splitlines() if ln.strip().startswith("File")][-4:]
            self.failed[key] = (repr(e)[:200] + " at " + " | ".join(where))[:900]
            self.log({"event": "graph_failed", "shape": [list(s) for s in key[:-1]], "why": self.failed[key]})
            torch.cuda.synchronize()
            # A failed capture can leave the shared pool unusable (piece 7: the next capture hit an
            # INTERNAL ASSERT in the caching allocator): from here on every step runs eagerly.
            self.enabled = False
        else:
            self.graphs[key] = (graph, static, loss)
            self.log({"event": "graph", "shape": [list(s) for s in key[:-1]], "graphs": len(self.graphs)})
        for p, g in zip(self.params, grads):
            p.grad.copy_(g)
        torch.cuda.synchronize()
        self.capture_s += time.perf_counter() - t0
        total = torch.cuda.get_device_properties(self.params[0].device).total_memory
        if torch.cuda.memory_reserved() > self.max_reserved_frac * total:
            self.release("reserved %.1f GiB > %.0f%% of the device after a capture"
                         % (torch.cuda.memory_reserved() / 2 ** 30, 100 * self.max_reserved_frac))
            left = torch.cuda.memory_reserved() / total
            if left > self.max_reserved_frac - 0.1:
                # what is held is not the graphs' (the pool's samples, the optimiser): a bound it cannot
                # get under would drop the graphs after every capture
                self.max_reserved_frac = min(0.95, left + 0.1)
                self.log({"event": "graph_bound_raised", "max_reserved_frac": round(self.max_reserved_frac, 3)})
        return out
