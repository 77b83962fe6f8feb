"""The feature frontend of model.yaml (FORMAT.md `frontend:`), in torch, CPU or GPU, deterministic.

Samples are 16-bit PCM scaled to [-1, 1) (x = pcm / 32768). Stages, exactly as model.yaml says:
  1. preemphasis  y[0] = x[0], y[n] = x[n] - a x[n-1]           (a = frontend.preemphasis, 0 = off)
  2. dither       y += dither * N(0, 1)                            (training only; 0 in every shipped model)
  3. framing      center false: frame i = y[i*hop : i*hop + win], frames = 1 + (N - win) // hop (0 if N < win)
  4. window       hann / hamming / povey, symmetric (torch.*_window(periodic=False); povey = hann^0.85)
  5. FFT          zero-padded to n_fft, |X|^power over the n_fft/2 + 1 bins
  6. mel          triangular filters of torchaudio.functional.melscale_fbanks(mel_scale, norm)
  7. log          ln(max(mel, log_floor))
Normalisation (x - mean) / std is NOT applied here: the engine applies it from the model's weights
(frontend.mean / frontend.std), so the .npy features a client sends are the output of this module.
"""
import math

import numpy as np
import torch


def _hz_to_mel(f, scale):
    if scale == "htk":
        return 2595.0 * math.log10(1.0 + f / 700.0)
    # slaney: linear below 1 kHz, logarithmic above
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, math.log(6.4) / 27.0
    if f < min_log_hz:
        return f / f_sp
    return min_log_hz / f_sp + math.log(f / min_log_hz) / logstep


def _mel_to_hz(m, scale):
    if scale == "htk":
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, math.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp
    m = np.asarray(m, dtype=np.float64)
    return np.where(m < min_log_mel, f_sp * m, min_log_hz * np.exp(logstep * (m - min_log_mel)))


def mel_filterbank(n_fft, sample_rate, n_mels, f_min, f_max, scale="slaney", norm="slaney"):
    """[n_fft // 2 + 1, n_mels] filter matrix, float64, as torchaudio.functional.melscale_fbanks."""
    n_freqs = n_fft // 2 + 1
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs)
    m_pts = np.linspace(_hz_to_mel(f_min, scale), _hz_to_mel(f_max, scale), n_mels + 2)
    f_pts = _mel_to_hz(m_pts, scale) if scale == "slaney" else np.array([_mel_to_hz(m, scale) for m in m_pts])
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    fb = np.maximum(0.0, np.minimum(down, up))
    if norm == "slaney":
        fb *= 2.0 / (f_pts[2:n_mels + 2] - f_pts[:n_mels])
    return fb


def window(kind, length):
    if kind == "hann":
        return torch.hann_window(length, periodic=False, dtype=torch.float64)
    if kind == "hamming":
        return torch.hamming_window(length, periodic=False, dtype=torch.float64)
    if kind == "povey":
        return torch.hann_window(length, periodic=False, dtype=torch.float64).pow(0.85)
    raise ValueError("unknown window %r" % kind)


class LogMel:
    """Callable frontend bound to a FrontendConfig (rnntd_ref.config) or any object with its fields."""

    def __init__(self, fe, device="cpu", dtype=torch.float32):
        if fe.center:
            raise ValueError("frontend.center: true is not implemented (every rnntd model uses false)")
        self.fe, self.device, self.dtype = fe, torch.device(device), dtype
        self.win = window(fe.window, fe.win_length).to(self.device, dtype)
        self.fb = torch.from_numpy(mel_filterbank(fe.n_fft, fe.sample_rate, fe.n_mels, fe.f_min, fe.f_max,
                                                  fe.mel_scale, fe.mel_norm)).to(self.device, dtype)

    def n_frames(self, n_samples):
        fe = self.fe
        return 0 if n_samples < fe.win_length else 1 + (n_samples - fe.win_length) // fe.hop_length

    def batch(self, waves, lengths, generator=None, warp=None):
        """waves [B, N] float samples in [-1, 1) (padded), lengths [B] -> (feats [B, T, n_mels], frames [B]).
        Frames of item b past its own frame count are zero. warp [B] (training only): vocal-tract-length
        perturbation, the power spectrum of item b read at frequency f / warp[b] (linear interpolation
        between bins, the top bin repeated), so every formant moves to warp[b] times its frequency."""
        fe = self.fe
        x = waves.to(self.device, self.dtype)
        if fe.preemphasis:
            x = torch.cat([x[:, :1], x[:, 1:] - fe.preemphasis * x[:, :-1]], dim=1)
        if fe.dither:
            x = x + fe.dither * torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        lengths = torch.as_tensor(lengths, device=self.device)
        if x.shape[1] < fe.win_length:
            return x.new_zeros(x.shape[0], 0, fe.n_mels), torch.zeros_like(lengths)
        frames = x.unfold(1, fe.win_length, fe.hop_length) * self.win      # [B, T, win]
        spec = torch.fft.rfft(frames, n=fe.n_fft, dim=-1).abs()
        spec = spec.pow(fe.power) if fe.power != 1.0 else spec
        if warp is not None:
            spec = warp_spectrum(spec, torch.as_tensor(warp, device=self.device, dtype=self.dtype))
        mel = torch.clamp(spec @ self.fb, min=fe.log_floor).log()
        nf = torch.where(lengths >= fe.win_length, 1 + (lengths - fe.win_length) // fe.hop_length,
                         torch.zeros_like(lengths))
        mask = torch.arange(mel.shape[1], device=self.device)[None, :] < nf[:, None]
        return mel * mask[..., None], nf

    def __call__(self, wave):
        """wave [N] float samples -> [T, n_mels]."""
        w = torch.as_tensor(wave)
        f, nf = self.batch(w[None], torch.tensor([w.shape[0]]))
        return f[0, :int(nf[0])]


def warp_spectrum(spec, warp):
    """spec [B, T, K] -> spec[b, t, k / warp[b]] (linear interpolation, clamped to the last bin)."""
    K = spec.shape[-1]
    src = (torch.arange(K, device=spec.device, dtype=spec.dtype)[None, :] / warp[:, None]).clamp(max=K - 1)
    lo = src.floor().long()
    hi = (lo + 1).clamp(max=K - 1)
    frac = (src - lo.to(spec.dtype))[:, None, :]
    idx_lo = lo[:, None, :].expand(-1, spec.shape[1], -1)
    idx_hi = hi[:, None, :].expand(-1, spec.shape[1], -1)
    return spec.gather(2, idx_lo) * (1 - frac) + spec.gather(2, idx_hi) * frac


def read_wav(path):
    """16-bit mono PCM WAV -> float32 numpy samples in [-1, 1) and the sample rate."""
    import wave
    with wave.open(path) as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            raise ValueError("%s: need 16-bit mono PCM" % path)
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return pcm.astype(np.float32) / 32768.0, w.getframerate()
