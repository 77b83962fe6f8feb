"""NeMo's AudioToMelSpectrogramPreprocessor settings (a .nemo file's `preprocessor:` block) -> the rnntd
frontend (FORMAT.md), exactly or not at all.

NeMo (nemo/collections/asr/parts/preprocessing/features.py, FilterbankFeatures, eval mode) computes:
pre-emphasis (first sample kept); torch.stft(center=True) with torch's default reflect padding and a
symmetric window centred in n_fft (n_fft defaults to the next power of two of the window); |X|, then
^mag_power; librosa's mel filterbank (slaney scale, `mel_norm` slaney or none); ln(x + guard) or
ln(max(x, guard)) (`log_zero_guard_type` add | clamp, `log_zero_guard_value` 2^-24 by default);
per-feature normalisation over the utterance's frames (unbiased std + 1e-5); frames = 1 + N // hop.
Dither is added only while training (`if self.training and self.dither > 0`), so eval has none.
Settings with no exact rnntd counterpart are errors naming the key.
"""
import math

from rnntd_ref.config import FrontendConfig

from .common import CheckpointError

_TARGETS = ("nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "nemo.collections.asr.modules.audio_preprocessing.AudioToMelSpectrogramPreprocessor")
_IGNORED = {"_target_", "dither", "pad_to", "pad_value", "rng", "nb_max_freq", "stft_conv", "stft_exact_pad"}
_DEFAULTS = dict(sample_rate=16000, window_size=0.02, window_stride=0.01, n_window_size=None, n_window_stride=None,
                 window="hann", normalize="per_feature", n_fft=None, preemph=0.97, features=64, lowfreq=0,
                 highfreq=None, log=True, log_zero_guard_type="add", log_zero_guard_value=2 ** -24, frame_splicing=1,
                 exact_pad=False, mag_power=2.0, nb_augmentation_prob=0.0, use_torchaudio=False, mel_norm="slaney")


def frontend_from_preprocessor(pre, where="preprocessor"):
    """NeMo's preprocessor config (a dict) -> FrontendConfig. Raises CheckpointError naming the key."""
    target = pre.get("_target_", _TARGETS[0])
    if target not in _TARGETS:
        raise CheckpointError(f"{where}._target_: {target!r} is not supported (AudioToMelSpectrogramPreprocessor only)")
    for k in pre:
        if k not in _DEFAULTS and k not in _IGNORED:
            raise CheckpointError(f"{where}.{k}: unknown preprocessor setting")
    get = lambda k: pre.get(k, _DEFAULTS[k])  # noqa: E731
    sr = int(get("sample_rate"))
    win = get("n_window_size") or int(get("window_size") * sr)
    hop = get("n_window_stride") or int(get("window_stride") * sr)
    n_fft = get("n_fft") or 2 ** math.ceil(math.log2(win))
    if get("exact_pad"):
        raise CheckpointError(f"{where}.exact_pad: true is not supported (reflect padding of (n_fft - hop) / 2 without centring)")
    if get("use_torchaudio"):
        raise CheckpointError(f"{where}.use_torchaudio: true is not supported (torchaudio's filterbank differs from librosa's)")
    if int(get("frame_splicing")) != 1:
        raise CheckpointError(f"{where}.frame_splicing: {get('frame_splicing')} is not supported (NeMo's splice_frames "
                              "repeats each frame; only 1 is converted)")
    if not get("log"):
        raise CheckpointError(f"{where}.log: false is not supported (rnntd features are log mel energies)")
    if get("window") not in ("hann", "hamming"):
        raise CheckpointError(f"{where}.window: {get('window')!r} is not supported (hann or hamming)")
    norm = get("normalize")
    if norm not in ("per_feature", None, "none", "NA"):
        raise CheckpointError(f"{where}.normalize: {norm!r} is not supported (per_feature or none)")
    guard_type, guard = get("log_zero_guard_type"), get("log_zero_guard_value")
    if guard_type not in ("add", "clamp"):
        raise CheckpointError(f"{where}.log_zero_guard_type: {guard_type!r} is not add or clamp")
    if isinstance(guard, str):
        if guard == "tiny":
            guard = 1.1754943508222875e-38
        elif guard == "eps":
            guard = 1.1920928955078125e-07
        else:
            raise CheckpointError(f"{where}.log_zero_guard_value: {guard!r} is not a number, tiny or eps")
    if not 1e-30 <= float(guard) <= 1.0:
        raise CheckpointError(f"{where}.log_zero_guard_value: {guard} is outside [1e-30, 1]")
    if float(get("nb_augmentation_prob") or 0.0) != 0.0:
        pass  # training-only augmentation (narrowband): not applied in eval
    mel_norm = get("mel_norm")
    if mel_norm not in ("slaney", None):
        raise CheckpointError(f"{where}.mel_norm: {mel_norm!r} is not supported (slaney or null)")
    if n_fft % 2:
        raise CheckpointError(f"{where}.n_fft: {n_fft} is odd")
    high = get("highfreq") or sr / 2
    return FrontendConfig(sample_rate=sr, preemphasis=float(get("preemph") or 0.0), dither=0.0, window=get("window"),
                          win_length=int(win), hop_length=int(hop), n_fft=int(n_fft), center=True, pad_mode="reflect",
                          power=float(get("mag_power")), n_mels=int(get("features")), f_min=float(get("lowfreq")),
                          f_max=float(high), mel_scale="slaney", mel_norm="slaney" if mel_norm else "none",
                          log_floor=float(guard), log_guard="add" if guard_type == "add" else "max",
                          normalize="per_feature" if norm == "per_feature" else "none")
