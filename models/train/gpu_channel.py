"""A fresh random channel for every replay of an utterance, on the GPU: rooms, noise, level and VTLP.

Why: synthesis on the GPU machine's 15 cores makes ~430-550 audio seconds per second while the graphed
training step takes in up to ~15,000, so a piece reads its few fresh hours dozens of times. With the
channel baked into the features at synthesis time (synth.py channel_spec), every re-reading was the
same audio; pieces 7 and 8 trained their loss down and their dev WER up. The pool now keeps each
utterance's 16-bit samples on the device (int16, ~115 MB per hour) and draws, per batch, a new channel for
every utterance before the log-mel frontend:

  - a synthetic room (exponentially decaying noise, RT60 and direct-to-reverberant ratio drawn as in
    synth.py) for utterances whose synthesised channel had no room, convolved by FFT; the output keeps
    the input's length (the tail past the end is cut) and its RMS;
  - white, pink or brown noise at a drawn SNR over the utterance's own samples;
  - a peak level in dBFS (the model's normalisation is global, so level matters);
  - a vocal-tract-length warp factor for the frontend (features.warp_spectrum), drawn anew each time.

Nothing changes the number of samples, so an utterance keeps its frame count and its length bucket
(the CUDA-graph shapes). Codecs and speed/tempo stay with synth.py (they need sox or change lengths).
The draws come from rng (random.Random, the trainer's) and a device generator seeded from it, so a
piece is reproducible from its seeds as before.
"""
import math

import torch

DEFAULTS = {"p_rir": 0.3, "rt60": [0.15, 0.9], "drr": [0.0, 12.0], "p_noise": 0.4, "snr": [0.0, 30.0],
            "p_level": 0.5, "level": [-35.0, -1.0], "p_vtlp": 0.7, "vtlp": [0.88, 1.12]}


def _next_pow2(n):
    return 1 << (max(n, 1) - 1).bit_length()


def room_responses(rt60, drr_db, length, sample_rate, gen):
    """rt60 [R] s, drr_db [R] -> impulse responses [R, length]: h[0] the direct path, h[1:] decaying
    Gaussian noise with energy 10^(-drr/10) of the direct path's."""
    R = rt60.shape[0]
    n = torch.arange(length, device=rt60.device, dtype=torch.float32)
    decay = torch.exp(-6.9078 * n[None, :] / (rt60[:, None] * sample_rate))      # -60 dB at rt60
    h = torch.randn(R, length, generator=gen, device=rt60.device) * decay
    h[:, 0] = 0.0
    tail = h.pow(2).sum(1).clamp(min=1e-12)
    h = h / tail.sqrt()[:, None] * torch.pow(10.0, -drr_db / 20.0)[:, None]
    h[:, 0] = 1.0
    return h


def coloured_noise(B, N, exponent, gen, device):
    """[B, N] unit-RMS noise with power spectrum ~ 1 / f^exponent[b] (0 white, 1 pink, 2 brown)."""
    w = torch.randn(B, N, generator=gen, device=device)
    if bool((exponent == 0).all()):
        return w
    X = torch.fft.rfft(w, dim=1)
    f = torch.arange(X.shape[1], device=device, dtype=torch.float32).clamp(min=1.0)
    X = X * f[None, :].pow(-exponent[:, None] / 2)
    y = torch.fft.irfft(X, n=N, dim=1)
    return y / y.pow(2).mean(1, keepdim=True).clamp(min=1e-20).sqrt()


class GpuChannel:
    """channel(waves [B, N] float32 on the device, lengths [B], has_room [B] bool list) ->
    (waves [B, N], vtlp warp [B] or None). Samples past each length stay 0."""

    def __init__(self, cfg, sample_rate, device):
        self.cfg = dict(DEFAULTS, **(cfg or {}))
        self.sr = sample_rate
        self.device = torch.device(device)
        self.gen = torch.Generator(device=self.device)

    def __call__(self, x, lengths, has_room, rng):
        c, B, N = self.cfg, x.shape[0], x.shape[1]
        self.gen.manual_seed(rng.randrange(1 << 62))
        dev = x.device
        lens = torch.as_tensor(lengths, device=dev)
        valid = (torch.arange(N, device=dev)[None, :] < lens[:, None]).float()
        x = x * valid
        rms0 = (x.pow(2).sum(1) / lens.clamp(min=1)).sqrt()
        # draws on the host, in a fixed order per utterance
        room, rt, dr, noise, snr, expo, level, warp = [], [], [], [], [], [], [], []
        for b in range(B):
            if not has_room[b] and rng.random() < c["p_rir"]:
                room.append(b)
                rt.append(rng.uniform(*c["rt60"]))
                dr.append(rng.uniform(*c["drr"]))
            if rng.random() < c["p_noise"]:
                noise.append(b)
                snr.append(rng.uniform(*c["snr"]))
                expo.append(float(rng.choice([0, 1, 2])))
            level.append(rng.uniform(*c["level"]) if rng.random() < c["p_level"] else None)
            warp.append(rng.uniform(*c["vtlp"]) if rng.random() < c["p_vtlp"] else 1.0)
        if room:
            idx = torch.tensor(room, device=dev)
            L = min(int(max(rt) * self.sr), N)
            h = room_responses(torch.tensor(rt, device=dev), torch.tensor(dr, device=dev), L, self.sr, self.gen)
            n = _next_pow2(N + L)
            y = torch.fft.irfft(torch.fft.rfft(x[idx], n=n, dim=1) * torch.fft.rfft(h, n=n, dim=1), n=n, dim=1)[:, :N]
            y = y * valid[idx]
            rms = (y.pow(2).sum(1) / lens[idx].clamp(min=1)).sqrt().clamp(min=1e-9)
            x = x.index_copy(0, idx, y * (rms0[idx] / rms)[:, None])
        if noise:
            idx = torch.tensor(noise, device=dev)
            z = coloured_noise(len(noise), N, torch.tensor(expo, device=dev), self.gen, dev)
            gain = rms0[idx] * torch.pow(10.0, -torch.tensor(snr, device=dev) / 20.0)
            x = x.index_copy(0, idx, x[idx] + z * gain[:, None] * valid[idx])
        if any(v is not None for v in level):
            peak = x.abs().amax(1).clamp(min=1e-9)
            want = torch.tensor([math.pow(10.0, v / 20.0) if v is not None else 0.0 for v in level], device=dev)
            keep = torch.tensor([v is None for v in level], device=dev)
            x = x * torch.where(keep, torch.ones_like(want), want / peak)[:, None]
        x = x.clamp(-1.0, 1.0)
        w = torch.tensor(warp, device=dev) if any(v != 1.0 for v in warp) else None
        return x, w
