"""model.yaml <-> ModelConfig (FORMAT.md, model.yaml).

load_config() is as strict as the C loader: unknown keys, duplicate keys, wrong types and every rule of
FORMAT.md are errors naming `file:line:column` and the key. save_config() writes the documented key order
with flow-style layer lists, so a saved file reads like the example in FORMAT.md.
"""
import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import List

import yaml

FORMAT_NAME = "rnntd"
FORMAT_VERSION = 1
MAX_SIZE = 16384
MAX_BIG_BLANKS = 8


@dataclass
class FrontendConfig:
    sample_rate: int = 16000
    preemphasis: float = 0.0
    dither: float = 0.0
    window: str = "hann"
    win_length: int = 400
    hop_length: int = 160
    n_fft: int = 512
    center: bool = False
    power: float = 2.0
    n_mels: int = 80
    f_min: float = 0.0
    f_max: float = 8000.0
    mel_scale: str = "slaney"
    mel_norm: str = "slaney"
    log_floor: float = 1e-10
    normalize: str = "global"
    pad_mode: str = "reflect"        # center: true only
    log_guard: str = "max"           # max: ln(max(mel, log_floor)); add: ln(mel + log_floor)
    spectrum_offset: float = 0.0     # added to |X|^power before the filterbank
    length: str = "frames"           # frames | hop_ceil (Jasper/MLPerf frame count)


@dataclass
class LayerConfig:
    input: int
    hidden: int
    time_stack: int = 1
    proj: int = 0              # encoder only: a projection LSTM (h = W_hr (o * phi(c)), P = proj < hidden); 0 = none
    layer_norm: bool = False   # encoder only: LayerNorm (eps 1e-5, weight and bias) over the layer's output

    @property
    def out(self):
        """Width of the layer's output (and of its recurrent state h)."""
        return self.proj if self.proj else self.hidden


@dataclass
class EncoderConfig:
    layers: List[LayerConfig]


@dataclass
class PredictorConfig:
    embedding: int
    layers: List[LayerConfig]


@dataclass
class JointConfig:
    dim: int
    activation: str = "relu"


# The multi-blank rule (FORMAT.md stage 6), the twin of engine/multiblank.h. The joint's outputs are the
# tokens [0, V), the big blanks, the blank (V + n); big blank i (durations[i]) is output blank - 1 - i.
def mb_output(vocab_size, durations, i):
    """The joint output of big blank i."""
    return vocab_size + len(durations) - 1 - i


def mb_advance(k, vocab_size, durations):
    """Frames the decoder moves on after joint output k: 0 for a label (it stays on its frame until
    max_symbols labels were emitted there), 1 for the blank, durations[i] for big blank i."""
    if k < vocab_size:
        return 0
    if k == vocab_size + len(durations):
        return 1
    return durations[mb_output(vocab_size, durations, 0) - k]  # the i with mb_output(..., i) == k


def mb_frames_skipped(k, t, T_enc, vocab_size, durations):
    """What output k on frame t adds to frames_skipped: the frames of its move beyond the first that
    exist (a big blank may jump past the last of the T_enc encoder frames)."""
    d = mb_advance(k, vocab_size, durations)
    return d - 1 - max(t + d - T_enc, 0) if d else 0


@dataclass
class ModelConfig:
    name: str
    frontend: FrontendConfig
    feature_dim: int
    frame_stacking: int
    lstm_activation: str
    encoder: EncoderConfig
    predictor: PredictorConfig
    joint: JointConfig
    vocab_size: int
    big_blank_durations: List[int] = field(default_factory=list)
    max_symbols: int = 10
    stacking_tail: str = "pad"   # pad: ceil(T/k) stacked frames (zero padded) | drop: floor(T/k) (NeMo)
    format: str = FORMAT_NAME
    version: int = FORMAT_VERSION

    # Derived sizes, used everywhere.
    @property
    def n_big(self):
        return len(self.big_blank_durations)

    @property
    def n_out(self):
        return self.vocab_size + self.n_big + 1

    @property
    def blank(self):
        return self.vocab_size + self.n_big

    @property
    def encoder_hidden(self):
        return self.encoder.layers[-1].out

    @property
    def predictor_hidden(self):
        return self.predictor.layers[-1].hidden

    @property
    def subsampling(self):
        s = self.frame_stacking
        for layer in self.encoder.layers:
            s *= layer.time_stack
        return s

    def encoder_frames(self, frames):
        """Encoder frames produced from `frames` input frames (ceil at every stacking)."""
        t = frames // self.frame_stacking if self.stacking_tail == "drop" else -(-frames // self.frame_stacking)
        for layer in self.encoder.layers:
            t = -(-t // layer.time_stack)
        return t

    def big_blank_duration(self, k):
        """Frames skipped by joint output k when it is a big blank, else 0."""
        return mb_advance(k, self.vocab_size, self.big_blank_durations) if self.vocab_size <= k < self.blank else 0


# Key order of FORMAT.md; the bool says whether the key may be left out, the value is then the default.
_FRONTEND_KEYS = [
    ("sample_rate", int, False), ("preemphasis", float, True), ("dither", float, True),
    ("window", str, False), ("win_length", int, False), ("hop_length", int, False),
    ("n_fft", int, False), ("center", bool, True), ("power", float, True), ("n_mels", int, False),
    ("f_min", float, False), ("f_max", float, False), ("mel_scale", str, False),
    ("mel_norm", str, True), ("log_floor", float, False), ("normalize", str, False),
    ("pad_mode", str, True), ("log_guard", str, True), ("spectrum_offset", float, True), ("length", str, True),
]
# Keys added after the first models were written: saved only when they differ from their default, so
# files of models that do not use them stay as they were.
_FRONTEND_OPTIONAL_SAVE = {"pad_mode": "reflect", "log_guard": "max", "spectrum_offset": 0.0, "length": "frames"}
_TOP_KEYS = ["format", "version", "name", "frontend", "feature_dim", "frame_stacking", "lstm_activation",
             "encoder", "predictor", "joint", "vocab_size", "big_blank_durations", "max_symbols", "stacking_tail"]
_TOP_OPTIONAL = {"stacking_tail"}
_CHOICES = {
    "frontend.window": ("hann", "hamming", "povey"),
    "frontend.mel_scale": ("slaney", "htk"),
    "frontend.mel_norm": ("slaney", "none"),
    "frontend.normalize": ("none", "global", "per_feature", "per_feature_stacked"),
    "frontend.pad_mode": ("reflect", "constant"),
    "frontend.log_guard": ("max", "add"),
    "frontend.length": ("frames", "hop_ceil"),
    "lstm_activation": ("hard", "soft"),
    "joint.activation": ("relu", "tanh"),
    "stacking_tail": ("pad", "drop"),
}
# Ranges beyond FORMAT.md's general rules, the same as the C loader's (engine/model_load.c).
_FRONTEND_RANGES = {
    "sample_rate": (1000, 384000), "win_length": (1, 1 << 16), "hop_length": (1, 1 << 16), "n_fft": (1, 1 << 17),
    "n_mels": (1, 4096), "preemphasis": (0.0, 1.0), "dither": (0.0, 1e3), "power": (0.5, 4.0),
    "f_min": (0.0, 1e6), "f_max": (0.0, 1e6), "log_floor": (1e-30, 1.0), "spectrum_offset": (0.0, 1.0),
}
MAX_LAYERS = 32
_INT_RE = re.compile(r"^[-+]?[0-9]+$")
_FLOAT_RE = re.compile(r"^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")
_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


# ---------------------------------------------------------------- reading


class _Ctx:
    def __init__(self, path):
        self.path = path

    def err(self, node, key, msg):
        if node is not None:
            m = node.start_mark
            where = f"{self.path}:{m.line + 1}:{m.column + 1}"
        else:
            where = f"{self.path}"
        return ValueError(f"{where}: {key}: {msg}")


def _mapping(ctx, node, key, spec):
    """spec: list of (name, optional). Returns dict name -> (value node, key node)."""
    if not isinstance(node, yaml.MappingNode):
        raise ctx.err(node, key, "expected a mapping")
    out = {}
    allowed = {name for name, _ in spec}
    for knode, vnode in node.value:
        if not isinstance(knode, yaml.ScalarNode) or knode.tag != "tag:yaml.org,2002:str":
            raise ctx.err(knode, key, "keys must be plain strings")
        k = knode.value
        full = f"{key}.{k}" if key else k
        if k not in allowed:
            raise ctx.err(knode, full, "unknown key")
        if k in out:
            raise ctx.err(knode, full, "duplicate key")
        out[k] = vnode
    for name, optional in spec:
        if name not in out and not optional:
            raise ctx.err(node, f"{key}.{name}" if key else name, "required key missing")
    return out


def _scalar(ctx, node, key, kind):
    if not isinstance(node, yaml.ScalarNode):
        raise ctx.err(node, key, f"expected a {kind.__name__} scalar")
    tag, text, plain = node.tag, node.value, node.style is None
    if kind is int:
        if tag != "tag:yaml.org,2002:int" or not _INT_RE.match(text):
            raise ctx.err(node, key, f"expected a decimal integer, got {text!r}")
        return int(text, 10)
    if kind is float:
        if tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") or (plain and tag == "tag:yaml.org,2002:str"):
            if not _FLOAT_RE.match(text):
                raise ctx.err(node, key, f"expected a finite decimal number, got {text!r}")
            v = float(text)
            if not math.isfinite(v):
                raise ctx.err(node, key, f"must be finite, got {text!r}")
            return v
        raise ctx.err(node, key, f"expected a number, got {text!r}")
    if kind is bool:
        if tag != "tag:yaml.org,2002:bool" or text not in ("true", "false"):
            raise ctx.err(node, key, f"expected true or false, got {text!r}")
        return text == "true"
    if tag != "tag:yaml.org,2002:str":
        raise ctx.err(node, key, f"expected a string, got {text!r}")
    return text


def _layers(ctx, node, key, encoder=False):
    if not isinstance(node, yaml.SequenceNode):
        raise ctx.err(node, key, "expected a list of layers")
    if not node.value:
        raise ctx.err(node, key, "at least one layer is required")
    out = []
    for i, item in enumerate(node.value):
        k = f"{key}[{i}]"
        m = _mapping(ctx, item, k, [("input", False), ("hidden", False), ("time_stack", True), ("proj", True),
                                    ("layer_norm", True)])
        layer = LayerConfig(input=_scalar(ctx, m["input"], k + ".input", int),
                            hidden=_scalar(ctx, m["hidden"], k + ".hidden", int))
        if "time_stack" in m:
            layer.time_stack = _scalar(ctx, m["time_stack"], k + ".time_stack", int)
        if "proj" in m:
            layer.proj = _scalar(ctx, m["proj"], k + ".proj", int)
        if "layer_norm" in m:
            layer.layer_norm = _scalar(ctx, m["layer_norm"], k + ".layer_norm", bool)
        out.append((layer, m))
    return out


class _NodeIndex:
    """Remembers the YAML node of each key so validate() errors can carry line:column."""

    def __init__(self):
        self.nodes = {}

    def add(self, key, node):
        self.nodes[key] = node


def load_config(path):
    """Read and validate a model.yaml -> ModelConfig. Raises ValueError('file:line:col: key: why')."""
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8: {e}") from None
    return parse_config(text, str(path))


def parse_config(text, path="model.yaml"):
    ctx = _Ctx(path)
    try:
        docs = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise ValueError(f"{where}: YAML syntax error: {getattr(e, 'problem', e)}") from None
    if len(docs) != 1 or docs[0] is None:
        raise ValueError(f"{path}: expected exactly one YAML document")
    root = docs[0]
    idx = _NodeIndex()
    top = _mapping(ctx, root, "", [(k, k in _TOP_OPTIONAL) for k in _TOP_KEYS])
    for k, n in top.items():
        idx.add(k, n)
    fmt = _scalar(ctx, top["format"], "format", str)
    if fmt != FORMAT_NAME:
        raise ctx.err(top["format"], "format", f"must be {FORMAT_NAME!r}, got {fmt!r}")
    version = _scalar(ctx, top["version"], "version", int)
    if version != FORMAT_VERSION:
        raise ctx.err(top["version"], "version", f"unsupported version {version} (this reader knows {FORMAT_VERSION})")
    fe_m = _mapping(ctx, top["frontend"], "frontend", [(k, opt) for k, _, opt in _FRONTEND_KEYS])
    fe = FrontendConfig()
    for k, kind, _ in _FRONTEND_KEYS:
        if k in fe_m:
            idx.add("frontend." + k, fe_m[k])
            setattr(fe, k, _scalar(ctx, fe_m[k], "frontend." + k, kind))
    if "pad_mode" in fe_m and not fe.center:
        raise ctx.err(fe_m["pad_mode"], "frontend.pad_mode", "only allowed with center: true")
    enc_m = _mapping(ctx, top["encoder"], "encoder", [("layers", False)])
    enc_layers = _layers(ctx, enc_m["layers"], "encoder.layers")
    pred_m = _mapping(ctx, top["predictor"], "predictor", [("embedding", False), ("layers", False)])
    idx.add("predictor.embedding", pred_m["embedding"])
    pred_layers = _layers(ctx, pred_m["layers"], "predictor.layers")
    for prefix, layers in (("encoder.layers", enc_layers), ("predictor.layers", pred_layers)):
        for i, (_, m) in enumerate(layers):
            for k, n in m.items():
                idx.add(f"{prefix}[{i}].{k}", n)
    joint_m = _mapping(ctx, top["joint"], "joint", [("dim", False), ("activation", False)])
    for k, n in joint_m.items():
        idx.add("joint." + k, n)
    bb = top["big_blank_durations"]
    if not isinstance(bb, yaml.SequenceNode):
        raise ctx.err(bb, "big_blank_durations", "expected a list of integers")
    durations = [_scalar(ctx, n, f"big_blank_durations[{i}]", int) for i, n in enumerate(bb.value)]
    for i, n in enumerate(bb.value):
        idx.add(f"big_blank_durations[{i}]", n)
    cfg = ModelConfig(
        name=_scalar(ctx, top["name"], "name", str),
        frontend=fe,
        feature_dim=_scalar(ctx, top["feature_dim"], "feature_dim", int),
        frame_stacking=_scalar(ctx, top["frame_stacking"], "frame_stacking", int),
        lstm_activation=_scalar(ctx, top["lstm_activation"], "lstm_activation", str),
        encoder=EncoderConfig([layer for layer, _ in enc_layers]),
        predictor=PredictorConfig(embedding=_scalar(ctx, pred_m["embedding"], "predictor.embedding", int),
                                  layers=[layer for layer, _ in pred_layers]),
        joint=JointConfig(dim=_scalar(ctx, joint_m["dim"], "joint.dim", int),
                          activation=_scalar(ctx, joint_m["activation"], "joint.activation", str)),
        vocab_size=_scalar(ctx, top["vocab_size"], "vocab_size", int),
        big_blank_durations=durations,
        max_symbols=_scalar(ctx, top["max_symbols"], "max_symbols", int),
        stacking_tail=_scalar(ctx, top["stacking_tail"], "stacking_tail", str) if "stacking_tail" in top else "pad",
        format=fmt, version=version,
    )
    try:
        validate(cfg)
    except ConfigError as e:
        raise ctx.err(idx.nodes.get(e.key), e.key, e.why) from None
    return cfg


# ---------------------------------------------------------------- validation


class ConfigError(ValueError):
    """A rule of FORMAT.md broken by the value of `key`."""

    def __init__(self, key, why):
        super().__init__(f"{key}: {why}")
        self.key = key
        self.why = why


def _check_int(key, v, lo, hi):
    if type(v) is not int:
        raise ConfigError(key, f"must be an integer, got {v!r}")
    if not lo <= v <= hi:
        raise ConfigError(key, f"must be in [{lo}, {hi}], got {v}")


def _check_float(key, v):
    if type(v) not in (int, float) or not math.isfinite(v):
        raise ConfigError(key, f"must be a finite number, got {v!r}")


def validate(cfg):
    """Check every rule of FORMAT.md; raises ConfigError (a ValueError) naming the key."""
    if cfg.format != FORMAT_NAME:
        raise ConfigError("format", f"must be {FORMAT_NAME!r}")
    if cfg.version != FORMAT_VERSION:
        raise ConfigError("version", f"unsupported version {cfg.version!r}")
    if not isinstance(cfg.name, str) or not _NAME_RE.match(cfg.name):
        raise ConfigError("name", f"must be 1..64 characters of [A-Za-z0-9._-], got {cfg.name!r}")
    fe = cfg.frontend
    for k, kind, _ in _FRONTEND_KEYS:
        v = getattr(fe, k)
        key = "frontend." + k
        if kind is int:
            _check_int(key, v, *_FRONTEND_RANGES[k])
        elif kind is float:
            _check_float(key, v)
            lo, hi = _FRONTEND_RANGES[k]
            if not lo <= v <= hi:
                raise ConfigError(key, f"must be in [{lo}, {hi}], got {v}")
        elif kind is bool:
            if type(v) is not bool:
                raise ConfigError(key, f"must be true or false, got {v!r}")
        elif v not in _CHOICES[key]:
            raise ConfigError(key, f"must be one of {' | '.join(_CHOICES[key])}, got {v!r}")
    if fe.n_fft < fe.win_length:
        raise ConfigError("frontend.n_fft", f"must be >= win_length ({fe.win_length}), got {fe.n_fft}")
    if fe.hop_length > fe.win_length:
        raise ConfigError("frontend.hop_length", f"must be <= win_length ({fe.win_length}), got {fe.hop_length}")
    if not fe.f_min < fe.f_max:
        raise ConfigError("frontend.f_max", f"must be > f_min ({fe.f_min}), got {fe.f_max}")
    if not fe.f_max <= fe.sample_rate / 2:
        raise ConfigError("frontend.f_max", f"must be <= sample_rate/2 ({fe.sample_rate / 2}), got {fe.f_max}")
    _check_int("feature_dim", cfg.feature_dim, 1, 4096)
    if cfg.feature_dim != fe.n_mels:
        raise ConfigError("feature_dim", f"must equal frontend.n_mels ({fe.n_mels}), got {cfg.feature_dim}")
    _check_int("frame_stacking", cfg.frame_stacking, 1, 16)
    if cfg.lstm_activation not in _CHOICES["lstm_activation"]:
        raise ConfigError("lstm_activation", f"must be hard or soft, got {cfg.lstm_activation!r}")
    if not cfg.encoder.layers:
        raise ConfigError("encoder.layers", "at least one layer is required")
    if len(cfg.encoder.layers) > MAX_LAYERS:
        raise ConfigError("encoder.layers", f"at most {MAX_LAYERS} layers, got {len(cfg.encoder.layers)}")
    expect = cfg.feature_dim * cfg.frame_stacking
    for i, layer in enumerate(cfg.encoder.layers):
        k = f"encoder.layers[{i}]"
        _check_int(k + ".input", layer.input, 1, MAX_SIZE)
        _check_int(k + ".hidden", layer.hidden, 1, MAX_SIZE)
        _check_int(k + ".time_stack", layer.time_stack, 1, 16)
        if layer.proj:
            _check_int(k + ".proj", layer.proj, 1, layer.hidden - 1)
        if type(layer.layer_norm) is not bool:
            raise ConfigError(k + ".layer_norm", f"must be true or false, got {layer.layer_norm!r}")
        if layer.input != expect:
            why = ("feature_dim * frame_stacking" if i == 0 else
                   f"encoder.layers[{i - 1}] output (proj or hidden) * time_stack")
            raise ConfigError(k + ".input", f"must equal {why} = {expect}, got {layer.input}")
        expect = layer.out * layer.time_stack
    if cfg.encoder.layers[-1].time_stack != 1:
        # The joint reads He = the last layer's hidden size (FORMAT.md, joint.enc.weight [J, He]).
        raise ConfigError(f"encoder.layers[{len(cfg.encoder.layers) - 1}].time_stack",
                          "the last encoder layer can not be time-stacked (the encoder output is He wide)")
    _check_int("predictor.embedding", cfg.predictor.embedding, 1, MAX_SIZE)
    if not cfg.predictor.layers:
        raise ConfigError("predictor.layers", "at least one layer is required")
    if len(cfg.predictor.layers) > MAX_LAYERS:
        raise ConfigError("predictor.layers", f"at most {MAX_LAYERS} layers, got {len(cfg.predictor.layers)}")
    expect = cfg.predictor.embedding
    for i, layer in enumerate(cfg.predictor.layers):
        k = f"predictor.layers[{i}]"
        _check_int(k + ".input", layer.input, 1, MAX_SIZE)
        _check_int(k + ".hidden", layer.hidden, 1, MAX_SIZE)
        if layer.time_stack != 1:
            raise ConfigError(k + ".time_stack", "is only allowed in the encoder")
        if layer.proj or layer.layer_norm:
            raise ConfigError(k + (".proj" if layer.proj else ".layer_norm"), "is only allowed in the encoder")
        if layer.input != expect:
            why = "predictor.embedding" if i == 0 else f"predictor.layers[{i - 1}].hidden"
            raise ConfigError(k + ".input", f"must equal {why} = {expect}, got {layer.input}")
        expect = layer.hidden
    _check_int("joint.dim", cfg.joint.dim, 1, MAX_SIZE)
    if cfg.joint.activation not in _CHOICES["joint.activation"]:
        raise ConfigError("joint.activation", f"must be relu or tanh, got {cfg.joint.activation!r}")
    _check_int("vocab_size", cfg.vocab_size, 1, 65536)
    d = cfg.big_blank_durations
    if not isinstance(d, (list, tuple)):
        raise ConfigError("big_blank_durations", "must be a list")
    if len(d) > MAX_BIG_BLANKS:
        raise ConfigError("big_blank_durations", f"at most {MAX_BIG_BLANKS} durations, got {len(d)}")
    for i, v in enumerate(d):
        _check_int(f"big_blank_durations[{i}]", v, 2, 1000)
        if v in d[:i]:
            raise ConfigError(f"big_blank_durations[{i}]", f"duplicate duration {v}")
    _check_int("max_symbols", cfg.max_symbols, 1, 1000)
    if cfg.stacking_tail not in _CHOICES["stacking_tail"]:
        raise ConfigError("stacking_tail", f"must be pad or drop, got {cfg.stacking_tail!r}")
    if cfg.stacking_tail == "drop" and cfg.frontend.length == "hop_ceil":
        raise ConfigError("stacking_tail", "drop can not be combined with frontend.length: hop_ceil")
    return cfg


# ---------------------------------------------------------------- writing


def _yaml_float(v):
    """A float that PyYAML (YAML 1.1) and libyaml-based readers both read back as the same float."""
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"can not write non-finite {v}")
    r = repr(v)
    if "e" in r:
        mant, exp = r.split("e")
        if "." not in mant:
            mant += ".0"
        if exp[0] not in "+-":
            exp = "+" + exp
        r = f"{mant}e{exp}"
    return r


def _yaml_str(s):
    loaded = yaml.safe_load(s) if s else None
    if isinstance(loaded, str) and loaded == s:
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _layer_line(layer):
    parts = [f"input: {layer.input}", f"hidden: {layer.hidden}"]
    if layer.time_stack != 1:
        parts.append(f"time_stack: {layer.time_stack}")
    if layer.proj:
        parts.append(f"proj: {layer.proj}")
    if layer.layer_norm:
        parts.append("layer_norm: true")
    return "    - {" + ", ".join(parts) + "}"


def config_to_yaml(cfg):
    validate(cfg)
    fe = cfg.frontend
    lines = [f"format: {FORMAT_NAME}", f"version: {FORMAT_VERSION}", f"name: {_yaml_str(cfg.name)}", "frontend:"]
    for k, kind, _ in _FRONTEND_KEYS:
        v = getattr(fe, k)
        if k in _FRONTEND_OPTIONAL_SAVE and v == _FRONTEND_OPTIONAL_SAVE[k] and not (k == "pad_mode" and fe.center):
            continue
        if k == "pad_mode" and not fe.center:
            continue
        if kind is float:
            s = _yaml_float(v)
        elif kind is bool:
            s = "true" if v else "false"
        else:
            s = str(v)
        lines.append(f"  {k}: {s}")
    lines += [f"feature_dim: {cfg.feature_dim}", f"frame_stacking: {cfg.frame_stacking}",
              f"lstm_activation: {cfg.lstm_activation}", "encoder:", "  layers:"]
    lines += [_layer_line(layer) for layer in cfg.encoder.layers]
    lines += ["predictor:", f"  embedding: {cfg.predictor.embedding}", "  layers:"]
    lines += [_layer_line(layer) for layer in cfg.predictor.layers]
    lines += ["joint:", f"  dim: {cfg.joint.dim}", f"  activation: {cfg.joint.activation}",
              f"vocab_size: {cfg.vocab_size}",
              "big_blank_durations: [" + ", ".join(str(d) for d in cfg.big_blank_durations) + "]",
              f"max_symbols: {cfg.max_symbols}"]
    if cfg.stacking_tail != "pad":
        lines.append(f"stacking_tail: {cfg.stacking_tail}")
    return "\n".join(lines) + "\n"


def save_config(cfg, path):
    text = config_to_yaml(cfg)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


def config_from_dict(d):
    """Build a ModelConfig from a plain dict shaped like model.yaml (e.g. yaml.safe_load output)."""
    d = dict(d)
    fe = FrontendConfig(**d.pop("frontend"))
    enc = EncoderConfig([LayerConfig(**layer) for layer in d.pop("encoder")["layers"]])
    p = d.pop("predictor")
    pred = PredictorConfig(embedding=p["embedding"], layers=[LayerConfig(**layer) for layer in p["layers"]])
    joint = JointConfig(**d.pop("joint"))
    return ModelConfig(frontend=fe, encoder=enc, predictor=pred, joint=joint, **d)


def config_to_dict(cfg):
    return dataclasses.asdict(cfg)
