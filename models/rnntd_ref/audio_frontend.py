"""The model's audio frontend as FORMAT.md defines it, every option included (centring, pad_mode,
log_guard, spectrum_offset, length): the oracle for engine/frontend.c on the options that
models/train/features.py (the training frontend, center false only) does not have.

Centred framing is torch.stft(center=True) itself (the call NeMo and the MLPerf reference make), so the
reference carries torch's own padding and window placement rather than a re-statement of them.
"""
import torch

from .config import FrontendConfig


def _mel_filterbank(fe, dtype):
    from rnntd_train.features import mel_filterbank  # the training frontend's filterbank (float64)
    fb = mel_filterbank(fe.n_fft, fe.sample_rate, fe.n_mels, fe.f_min, fe.f_max, fe.mel_scale, fe.mel_norm)
    return torch.from_numpy(fb).to(dtype)  # [n_bins, n_mels]


def _window(fe, dtype):
    n = fe.win_length
    if fe.window == "hann":
        w = torch.hann_window(n, periodic=False, dtype=torch.float64)
    elif fe.window == "hamming":
        w = torch.hamming_window(n, periodic=False, dtype=torch.float64)
    else:
        w = torch.hann_window(n, periodic=False, dtype=torch.float64).pow(0.85)
    return w.to(dtype)


def n_frames(fe: FrontendConfig, n, stacking=1):
    """Frames of n samples (engine/frontend.c rnnt_frontend_frames)."""
    if not fe.center:
        t = 0 if n < fe.win_length else 1 + (n - fe.win_length) // fe.hop_length
    elif n == 0 or (fe.pad_mode == "reflect" and n <= fe.n_fft // 2):
        t = 0
    else:
        t = 1 + (n + 2 * (fe.n_fft // 2) - fe.n_fft) // fe.hop_length
    if fe.length == "hop_ceil":
        keep = -(-(-(-n // fe.hop_length)) // stacking) * stacking
        t = min(t, keep)
    return t


def log_mel(fe: FrontendConfig, wave, stacking=1, dtype=torch.float32):
    """wave [N] float samples -> features [T, n_mels] (dtype). `stacking`: the model's frame_stacking
    (length: hop_ceil counts stacked frames). Dither is not drawn (the engine's generator is its own)."""
    if fe.dither:
        raise ValueError("frontend.dither: the reference draws no noise; compare with dither 0")
    x = torch.as_tensor(wave).to(dtype).reshape(-1)
    n = x.shape[0]
    T = n_frames(fe, n, stacking)
    if T == 0:
        return torch.zeros(0, fe.n_mels, dtype=dtype)
    if fe.preemphasis:
        x = torch.cat([x[:1], x[1:] - fe.preemphasis * x[:-1]])
    win = _window(fe, dtype)
    if fe.center:
        X = torch.stft(x, n_fft=fe.n_fft, hop_length=fe.hop_length, win_length=fe.win_length, window=win,
                       center=True, pad_mode=fe.pad_mode, return_complex=True).T      # [frames, bins]
    else:
        frames = x.unfold(0, fe.win_length, fe.hop_length) * win
        X = torch.fft.rfft(frames, n=fe.n_fft, dim=-1)
    X = X[:T]
    if fe.power == 2.0:
        spec = torch.view_as_real(X).pow(2).sum(-1)
    else:
        spec = X.abs().pow(fe.power)
    if fe.spectrum_offset:
        spec = spec + fe.spectrum_offset
    mel = spec @ _mel_filterbank(fe, dtype)
    if fe.log_guard == "add":
        return torch.log(mel + fe.log_floor)
    return torch.log(torch.clamp(mel, min=fe.log_floor))
