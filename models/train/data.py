"""Tokens, manifests, and the in-memory feature pool the trainer draws batches from."""
import json
import os
import random
import re

import numpy as np
import torch

from .features import LogMel, read_wav

TOKENS = ["\u2581", "'"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
_ID = {c: i for i, c in enumerate(TOKENS)}
_ID[" "] = 0


def encode_text(text):
    """Normalised sentence (a-z ' space) -> token ids; the space is the word-boundary token ▁ (id 0)."""
    return [_ID[c] for c in text]


def decode_ids(ids):
    text = "".join(TOKENS[i] for i in ids).replace("\u2581", " ")
    return re.sub(" +", " ", text).strip()


def read_manifest(path):
    base = os.path.dirname(os.path.abspath(path))
    out = []
    for line in open(path):
        r = json.loads(line)
        r["path"] = os.path.join(base, r["path"])
        out.append(r)
    return out


class FeaturePool:
    """Utterances as fp16 log-mel features on the device, with their label ids."""

    def __init__(self, frontend_cfg, device, max_seconds=16.0, vtlp=False, keep_waves=False):
        """vtlp: apply each manifest record's "vtlp" warp factor (synth.py draws it for training data).
        keep_waves: also keep each utterance's 16-bit samples on the device (int16: exact, 2 bytes), so that collate_to(...,
        channel=) computes its features anew through a fresh random channel (gpu_channel.py)."""
        self.lm = LogMel(frontend_cfg, device=device)
        self.vtlp = vtlp
        self.device = device
        self.max_seconds = max_seconds
        self.feats, self.labels, self.meta = [], [], []
        self.waves = [] if keep_waves else None

    @classmethod
    def of(cls, feats, labels, device):
        """A pool of given utterances (fp16 features [T_i, F] on `device`, label ids on the CPU), without
        a frontend: for benchmarks and tests of batching."""
        pool = cls.__new__(cls)
        pool.lm, pool.device, pool.max_seconds, pool.vtlp = None, device, float("inf"), False
        pool.feats, pool.labels, pool.meta = list(feats), list(labels), [{} for _ in feats]
        pool.waves = None
        return pool

    def add_manifest(self, path, batch_seconds=400.0):
        """Adds a manifest's utterances; all or nothing: an error (e.g. the device out of memory) part
        way leaves the pool as it was (piece 11 died in here, holding half a shard)."""
        recs = [r for r in read_manifest(path) if 0.3 < r["duration"] <= self.max_seconds]
        recs.sort(key=lambda r: r["duration"])
        new_feats, new_waves, new_labels = [], [], []
        i = 0
        while i < len(recs):
            j, tot = i, 0.0
            while j < len(recs) and tot < batch_seconds:
                tot += recs[j]["duration"]
                j += 1
            waves = [read_wav(r["path"])[0] for r in recs[i:j]]
            n = max(len(w) for w in waves)
            pad = np.zeros((len(waves), n), dtype=np.float32)
            for k, w in enumerate(waves):
                pad[k, :len(w)] = w
            lens = torch.tensor([len(w) for w in waves])
            warp = None
            if self.vtlp:
                ws = [float(r.get("vtlp", 1.0)) for r in recs[i:j]]
                warp = torch.tensor(ws) if any(w != 1.0 for w in ws) else None
            feats, nf = self.lm.batch(torch.from_numpy(pad).to(self.device), lens.to(self.device), warp=warp)
            feats = feats.half()
            if self.waves is not None:
                wdev = torch.from_numpy(np.rint(pad * 32768.0).astype(np.int16)).to(self.device)
            for k, (r, n) in enumerate(zip(recs[i:j], nf.tolist())):    # one device sync per batch
                new_feats.append(feats[k, :n].clone())
                if self.waves is not None:
                    new_waves.append(wdev[k, :len(waves[k])].clone())
                new_labels.append(torch.tensor(encode_text(r["text"]), dtype=torch.long))
            i = j
        self.feats += new_feats
        if self.waves is not None:
            self.waves += new_waves
        self.labels += new_labels
        self.meta += recs
        return len(recs)

    def __len__(self):
        return len(self.feats)

    def stats(self, limit=3000):
        """Per-bin mean and std of the log-mel features (the model's frontend.mean / frontend.std)."""
        x = torch.cat([f.float() for f in self.feats[:limit]], dim=0).double()
        return x.mean(0).float(), x.std(0).clamp(min=1e-3).float()

    def batches(self, rng, max_frames, max_cells, subsampling):
        """Length-bucketed batches of indices over the whole pool, shuffled: each a list of indices with
        sum of frames <= max_frames and B * T_enc * (U+1) <= max_cells."""
        order = sorted(range(len(self)), key=lambda i: (self.feats[i].shape[0], rng.random()))
        out, cur, tmax, umax = [], [], 0, 0
        for i in order:
            T = self.feats[i].shape[0]
            U = len(self.labels[i])
            t2, u2 = max(tmax, T), max(umax, U)
            n = len(cur) + 1
            if cur and (n * t2 > max_frames or n * (t2 // subsampling + 1) * (u2 + 1) > max_cells):
                out.append(cur)
                cur, t2, u2 = [], T, U
            cur.append(i)
            tmax, umax = t2, u2
        if cur:
            out.append(cur)
        rng.shuffle(out)
        return out

    def bucket_shapes(self, max_frames, max_cells, subsampling, t_quant=96, max_frames_utt=None, quantile=0.98):
        """Fixed batch shapes for CUDA-graph training (graph_step.py), frozen at the first call: length
        bucket k holds utterances of up to T_k = k * t_quant frames and U_k labels, in batches of B_k.
        U_k = the `quantile` of labels per frame (over utterances of >= 2 s) times T_k, rounded up to 8:
        an utterance with more labels goes to the first longer bucket that has room for them.
        B_k obeys the same limits as batches(): B_k * T_k <= max_frames, B_k * (T_k // sub + 1) * (U_k + 1)
        <= max_cells. -> list of (B_k, T_k, U_k), index k - 1."""
        if getattr(self, "_shapes", None) is None:
            tq = -(-t_quant // subsampling) * subsampling              # whole encoder frames
            long_ = [len(l) / f.shape[0] for f, l in zip(self.feats, self.labels) if f.shape[0] >= 200]
            rate = sorted(long_)[int(quantile * (len(long_) - 1))] if long_ else 0.3
            longest = [f.shape[0] for f in self.feats] + ([int(self.max_seconds * 100) + 1]
                                                          if self.max_seconds != float("inf") else [])
            tmax = max_frames_utt or max(longest + [1])
            shapes = []
            for k in range(1, -(-tmax // tq) + 1):
                T = k * tq
                U = max(8, -(-int(rate * T + 0.999) // 8) * 8)
                B = max(1, min(max_frames // T, max_cells // ((T // subsampling + 1) * (U + 1))))
                shapes.append((B, T, U))
            self._shapes = shapes
        return self._shapes

    def bucket_batches(self, rng, max_frames, max_cells, subsampling, t_quant=96):
        """Like batches(), but every batch has one of the fixed shapes of bucket_shapes(): -> (list of
        (indices, (B, T, U))) shuffled, and the number of utterances that fit no bucket (left out)."""
        shapes = self.bucket_shapes(max_frames, max_cells, subsampling, t_quant)
        tq = shapes[0][1]
        members = [[] for _ in shapes]
        dropped = 0
        for i in range(len(self)):
            T, U = self.feats[i].shape[0], len(self.labels[i])
            k = max(0, -(-T // tq) - 1)
            while k < len(shapes) and U > shapes[k][2]:
                k += 1
            if k >= len(shapes):
                dropped += 1
                continue
            members[k].append(i)
        out = []
        for k, idx in enumerate(members):
            rng.shuffle(idx)
            B = shapes[k][0]
            out += [(idx[j:j + B], shapes[k]) for j in range(0, len(idx), B)]
        rng.shuffle(out)
        return out, dropped

    def rechannel(self, idx, channel, rng):
        """The features of utterances idx computed anew from their kept samples through channel
        (gpu_channel.GpuChannel: a fresh room, noise, level and VTLP draw each call) -> [n, T_max, F]
        fp16, each utterance with exactly its pooled frame count."""
        w = torch.nn.utils.rnn.pad_sequence([self.waves[i] for i in idx], batch_first=True).float() / 32768.0
        lens = [self.waves[i].shape[0] for i in idx]
        has_room = ["rir" in self.meta[i].get("aug", {}) for i in idx]
        x, warp = channel(w, lens, has_room, rng)
        f, _ = self.lm.batch(x, torch.tensor(lens), warp=warp)
        return f.half()

    def collate_to(self, idx, shape, channel=None, rng=None):
        """collate() padded to a fixed (B, T, U), with a weight per row: 1 for the utterances, 0 for the
        dummies that fill a short batch (T frames of zeros, no labels: a finite loss that the weighted
        mean gives no gradient). -> (feats, flen, labels, ulen, weight), all on the device. channel (with
        keep_waves): the features anew through a fresh random channel (rechannel), rng its draws."""
        B, T, U = shape
        n = len(idx)
        feats = torch.zeros(B, T, self.feats[idx[0]].shape[1], device=self.device)
        if channel is not None and self.waves is not None:
            f = self.rechannel(idx, channel, rng)
        else:
            f = torch.nn.utils.rnn.pad_sequence([self.feats[i] for i in idx], batch_first=True)
        feats[:n, :f.shape[1]] = f
        labels = torch.zeros(B, U, dtype=torch.long)
        flen = torch.full((B,), T, dtype=torch.long)
        ulen = torch.zeros(B, dtype=torch.long)
        for r, i in enumerate(idx):
            lab = self.labels[i]
            labels[r, :len(lab)] = lab
            flen[r] = self.feats[i].shape[0]
            ulen[r] = len(lab)
        weight = torch.zeros(B)
        weight[:n] = 1.0
        d = self.device
        return feats, flen.to(d), labels.to(d), ulen.to(d), weight.to(d)

    def collate(self, idx):
        """Pad a batch: (feats [B, T, F] fp32 on the device, flen, labels [B, U], ulen), lengths and labels
        on the device. The padding runs as one op per tensor, not one per utterance: at ~300 utterances
        per batch the per-utterance copies were hundreds of kernel launches per training step."""
        feats = torch.nn.utils.rnn.pad_sequence([self.feats[i] for i in idx], batch_first=True).float()
        labels = torch.nn.utils.rnn.pad_sequence([self.labels[i] for i in idx], batch_first=True)
        if labels.shape[1] == 0:
            labels = labels.new_zeros(len(idx), 1)
        flen = torch.tensor([self.feats[i].shape[0] for i in idx], dtype=torch.long)
        ulen = torch.tensor([len(self.labels[i]) for i in idx], dtype=torch.long)
        return feats, flen.to(self.device), labels.to(self.device), ulen.to(self.device)


def is_out_of_memory(e):
    oom = getattr(torch.cuda, "OutOfMemoryError", ())
    return (bool(oom) and isinstance(e, oom)) or (isinstance(e, RuntimeError) and "out of memory" in str(e))


def add_manifest_retrying(pool, path, free_memory):
    """pool.add_manifest(path); on running out of device memory, free_memory() (drop the training
    step's CUDA graphs and the allocator's cache) and try once more. Returns (utterances added,
    None) or (None, why) when even the retry ran out of memory: the caller stops taking shards and
    trains on what it has. Other errors propagate."""
    try:
        return pool.add_manifest(path), None
    except Exception as e:       # noqa: BLE001 - only out of memory is handled
        if not is_out_of_memory(e):
            raise
        first = repr(e)[:200]
    free_memory()
    try:
        return pool.add_manifest(path), None
    except Exception as e:       # noqa: BLE001
        if not is_out_of_memory(e):
            raise
        return None, "out of memory twice: %s / %s" % (first, repr(e)[:200])


def spec_augment(feats, flen, mean, rng, cfg):
    """SpecAugment on raw log-mel [B, T, F]: per utterance cfg["freq_masks"] frequency masks of width
    0..freq_width and cfg["time_masks"] time masks of width 0..min(time_width, len/10), filled with the
    global mean (0 after normalisation). The widths and positions come from rng (random.Random), drawn
    per utterance in that order; the masks are then applied to the whole batch in one op (the same
    result as filling each mask's slice in turn, without ~4 kernel launches per utterance)."""
    B, T, F = feats.shape
    lens = flen.tolist()                                       # one device sync, not one per utterance
    fr, tr = [], []
    for b in range(B):
        for _ in range(cfg["freq_masks"]):
            w = rng.randint(0, cfg["freq_width"])
            fr.append((rng.randint(0, F - w), w))
        L = lens[b]
        for _ in range(cfg["time_masks"]):
            w = rng.randint(0, min(cfg["time_width"], max(L // 10, 1)))
            tr.append((rng.randint(0, max(L - w, 0)), w))

    def hits(ranges, n):                 # ranges: B x k (start, width) pairs -> [B, n] bool, covered by any
        if not ranges:
            return torch.zeros(B, n, dtype=torch.bool, device=feats.device)
        r = torch.tensor(ranges, dtype=torch.long).view(B, -1, 2).to(feats.device)
        pos = torch.arange(n, device=feats.device).view(1, 1, n)
        lo, w = r[:, :, 0:1], r[:, :, 1:2]
        return ((pos >= lo) & (pos < lo + w)).any(dim=1)

    mask = hits(fr, F).unsqueeze(1) | hits(tr, T).unsqueeze(2)
    return torch.where(mask, mean.to(feats.dtype).view(1, 1, F), feats)


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def error_rates(pairs):
    """pairs of (reference, hypothesis) strings -> (WER, CER, word errors, words, char errors, chars)."""
    we = wn = ce = cn = 0
    for ref, hyp in pairs:
        we += edit_distance(ref.split(), hyp.split())
        wn += len(ref.split())
        ce += edit_distance(list(ref), list(hyp))
        cn += len(ref)
    return we / max(wn, 1), ce / max(cn, 1), we, wn, ce, cn


def seeded(seed):
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)
    return random.Random(seed)
