"""The LSTM transducer of FORMAT.md as a torch.nn.Module: the reference for every number the engine computes.

Written for obviousness. The LSTM cell is spelled out (no torch.nn.LSTM) so that the hard activations
of FORMAT.md can be used; parameter and buffer names are exactly the tensor names of weights.safetensors,
so `model.state_dict()` *is* the weights file. Works in float32 and float64 (`model.double()`).

Plain path (one utterance, what the goldens use):
    f, layer_outputs = model.encode(x)          # x [T, F] raw features
    g, state = model.predictor_init()           # after the start symbol
    z = model.joint(f[t], g)                    # logits [V + n + 1]
    g, state = model.predictor_step(k, state)   # after emitting label k
Batched path (training): model.forward_logits(feats, feat_lens, labels).
"""
import math

import torch
from torch import nn

from .config import ModelConfig, validate


# ---------------------------------------------------------------- activations (FORMAT.md, LSTM)


def hard_sigmoid(x):
    """clamp(x/6 + 1/2, 0, 1), the formula of FORMAT.md (PyTorch's F.hardsigmoid computes
    (x+3)/6, which can differ by one rounding); NaN propagates."""
    return torch.clamp(x / 6 + 0.5, 0.0, 1.0)


def hard_tanh(x):
    """clamp(x, -1, 1) = F.hardtanh; NaN propagates."""
    return torch.clamp(x, -1.0, 1.0)


def gate_functions(kind):
    """(sigma, phi) for lstm_activation `kind`."""
    if kind == "hard":
        return hard_sigmoid, hard_tanh
    if kind == "soft":
        return torch.sigmoid, torch.tanh
    raise ValueError(f"lstm_activation must be hard or soft, not {kind!r}")


def lstm_cell(a, c, kind):
    """One LSTM update from the gate pre-activations a [..., 4H] (gates i, f, g, o) and cell c [..., H]."""
    sig, phi = gate_functions(kind)
    ai, af, ag, ao = a.chunk(4, dim=-1)
    i, f, g, o = sig(ai), sig(af), phi(ag), sig(ao)
    c = f * c + i * g
    h = o * phi(c)
    return h, c


def stack_frames(x, k):
    """Stack k consecutive frames with stride k: [..., T, D] -> [..., ceil(T/k), k*D], zero padded."""
    if k == 1:
        return x
    T, D = x.shape[-2], x.shape[-1]
    T1 = -(-T // k)
    pad = T1 * k - T
    if pad:
        x = torch.cat([x, x.new_zeros(x.shape[:-2] + (pad, D))], dim=-2)
    return x.reshape(x.shape[:-2] + (T1, k * D))


# ---------------------------------------------------------------- modules


LAYER_NORM_EPS = 1e-5


class LayerNorm(nn.Module):
    """FORMAT.md's per-layer LayerNorm: (x - mean) / sqrt(var + 1e-5) * weight + bias over the last
    dimension, var the biased variance (torch.nn.LayerNorm's definition)."""

    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + LAYER_NORM_EPS) * self.weight + self.bias


class LSTMLayer(nn.Module):
    """One LSTM layer; parameters named like FORMAT.md: weight_ih [4H, I], weight_hh [4H, R],
    bias_ih [4H], bias_hh [4H], with R = H, or R = P for a projection LSTM, which also has weight_hr
    [P, H] (h = W_hr (o * phi(c)), torch.nn.LSTM's proj_size). layer_norm: a LayerNorm (norm.weight,
    norm.bias [R]) applied to the layer's output, not to the recurrent state."""

    def __init__(self, input_size, hidden_size, activation, proj=0, layer_norm=False):
        super().__init__()
        self.input_size, self.hidden_size, self.activation = input_size, hidden_size, activation
        H = hidden_size
        self.out_size = proj if proj else H
        self.weight_ih = nn.Parameter(torch.empty(4 * H, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * H, self.out_size))
        self.bias_ih = nn.Parameter(torch.empty(4 * H))
        self.bias_hh = nn.Parameter(torch.empty(4 * H))
        if proj:
            self.weight_hr = nn.Parameter(torch.empty(proj, H))
        else:
            self.weight_hr = None
        self.reset_parameters()
        self.norm = LayerNorm(self.out_size) if layer_norm else None

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)  # as torch.nn.LSTM
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def zero_state(self, batch_shape=(), like=None):
        h = like.new_zeros(tuple(batch_shape) + (self.out_size,))
        return h, like.new_zeros(tuple(batch_shape) + (self.hidden_size,))

    def _cell(self, a, c):
        h, c = lstm_cell(a, c, self.activation)
        if self.weight_hr is not None:
            h = h @ self.weight_hr.t()
        return h, c

    def step(self, x, state):
        """One time step: x [..., I], state (h, c) [..., R], [..., H] -> (h, c). No LayerNorm: the
        predictor has none (FORMAT.md)."""
        h, c = state
        a = (x @ self.weight_ih.t() + self.bias_ih) + (h @ self.weight_hh.t() + self.bias_hh)
        return self._cell(a, c)

    def forward(self, x):
        """Whole sequence from zero state: x [..., T, I] -> y [..., T, R] (after the LayerNorm, if any)."""
        T = x.shape[-2]
        xw = x @ self.weight_ih.t() + self.bias_ih  # the input GEMM for all steps at once
        h, c = self.zero_state(x.shape[:-2], like=x)
        ys = []
        for t in range(T):
            a = xw[..., t, :] + (h @ self.weight_hh.t() + self.bias_hh)
            h, c = self._cell(a, c)
            ys.append(h)
        if not ys:
            return x.new_zeros(x.shape[:-1] + (self.out_size,))
        y = torch.stack(ys, dim=-2)
        return self.norm(y) if self.norm is not None else y


class Frontend(nn.Module):
    """Stages 1-2: normalisation with the buffers `mean`, `std` (normalize: global) and frame stacking."""

    def __init__(self, feature_dim, stacking, normalize, stacking_tail="pad"):
        super().__init__()
        self.feature_dim, self.stacking, self.normalize = feature_dim, stacking, normalize
        self.drop_tail = stacking_tail == "drop"
        if normalize == "global":
            self.register_buffer("mean", torch.zeros(feature_dim))
            self.register_buffer("std", torch.ones(feature_dim))

    def forward(self, x, lengths=None):
        """x [..., T, F] -> [..., ceil(T/k), kF]. With lengths [B] (batched x [B, T, F]), frames past
        each length are zeroed after normalisation, so stacking pads with zeros as for one utterance.
        normalize per_feature / per_feature_stacked (per utterance) take one utterance [T, F]."""
        if not isinstance(x, torch.Tensor):
            x = torch.as_tensor(x)
        if self.normalize == "global":
            x = x.to(self.mean.dtype)
            x = (x - self.mean) / self.std
        if self.normalize == "per_feature":
            if x.dim() != 2:
                raise ValueError("normalize: per_feature takes one utterance [T, F]")
            x = per_feature_normalize(x)
        if lengths is not None:
            x = x * _time_mask(lengths, x.shape[-2], x)
        if self.drop_tail:  # stacking_tail: drop: the partial last group of frames is not an encoder input
            x = x[..., : x.shape[-2] // self.stacking * self.stacking, :]
        x = stack_frames(x, self.stacking)
        if self.normalize == "per_feature_stacked":
            if x.dim() != 2:
                raise ValueError("normalize: per_feature_stacked takes one utterance [T, F]")
            x = per_feature_normalize(x)
        return x


PER_FEATURE_EPS = 1e-5


def per_feature_normalize(x):
    """x [T, D] -> each column minus its mean over the T rows, over its unbiased standard deviation +
    1e-5 (FORMAT.md, normalize: per_feature); one row has no spread (std 0)."""
    if x.shape[0] == 0:
        return x
    mean = x.mean(dim=0)
    sd = x.std(dim=0) if x.shape[0] > 1 else torch.zeros_like(mean)
    return (x - mean) / (sd + PER_FEATURE_EPS)


class Encoder(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.lstm = nn.ModuleList(LSTMLayer(layer.input, layer.hidden, cfg.lstm_activation, layer.proj, layer.layer_norm)
                                  for layer in cfg.encoder.layers)
        self.time_stacks = [layer.time_stack for layer in cfg.encoder.layers]

    def forward(self, x, lengths=None):
        """x [..., T1, kF] -> (f [..., T_enc, He], each layer's output before its time stacking[, lengths])."""
        outs = []
        for layer, s in zip(self.lstm, self.time_stacks):
            y = layer(x)
            outs.append(y)
            if s > 1:
                if lengths is not None:
                    y = y * _time_mask(lengths, y.shape[-2], y)
                    lengths = -(-lengths // s)
                y = stack_frames(y, s)
            x = y
        return x, outs, lengths


class Predictor(nn.Module):
    """Embedding [V + 1, E] (row V = start symbol) and an LSTM stack."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embedding = nn.Parameter(torch.randn(cfg.vocab_size + 1, cfg.predictor.embedding))
        self.lstm = nn.ModuleList(LSTMLayer(layer.input, layer.hidden, cfg.lstm_activation)
                                  for layer in cfg.predictor.layers)

    def zero_state(self, batch_shape=()):
        return [layer.zero_state(batch_shape, like=self.embedding) for layer in self.lstm]

    def step(self, labels, state):
        """labels: an int or a LongTensor [...]; state: list of (h, c) per layer -> (g, new state)."""
        x = self.embedding[labels]
        new = []
        for layer, st in zip(self.lstm, state):
            h, c = layer.step(x, st)
            new.append((h, c))
            x = h
        return x, new

    def forward(self, labels):
        """Teacher forcing over a label sequence: labels [..., U] -> g [..., U+1, Hp], where row 0 is the
        output after the start symbol and row u the output after the u-th label."""
        start = labels.new_full(labels.shape[:-1] + (1,), self.embedding.shape[0] - 1)
        x = self.embedding[torch.cat([start, labels], dim=-1)]
        for layer in self.lstm:
            x = layer(x)
        return x


class Joint(nn.Module):
    """z = W_out act(W_enc f + b_enc + W_pred g + b_pred) + b_out; broadcasts over leading dims."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.enc = nn.Linear(cfg.encoder_hidden, cfg.joint.dim)
        self.pred = nn.Linear(cfg.predictor_hidden, cfg.joint.dim)
        self.out = nn.Linear(cfg.joint.dim, cfg.n_out)
        self.activation = cfg.joint.activation

    def hidden(self, f, g):
        h = self.enc(f) + self.pred(g)
        return torch.relu(h) if self.activation == "relu" else torch.tanh(h)

    def forward(self, f, g):
        return self.out(self.hidden(f, g))


def _time_mask(lengths, T, like):
    """[B, T, 1] mask, 1 where t < lengths[b]."""
    t = torch.arange(T, device=lengths.device)
    return (t[None, :] < lengths[:, None]).to(like.dtype).unsqueeze(-1)


class RNNTModel(nn.Module):
    """An LSTM transducer built from a ModelConfig; state_dict() keys are the safetensors names."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        validate(cfg)
        self.cfg = cfg
        self.frontend = Frontend(cfg.feature_dim, cfg.frame_stacking, cfg.frontend.normalize, cfg.stacking_tail)
        self.encoder = Encoder(cfg)
        self.predictor = Predictor(cfg)
        self.joint = Joint(cfg)

    @property
    def dtype(self):
        return self.predictor.embedding.dtype

    def _input(self, x):
        x = torch.as_tensor(x)
        return x.to(dtype=self.dtype, device=self.predictor.embedding.device)

    # --- one utterance (stages 1-5)
    def encode(self, x):
        """x [T, F] raw features -> (f [T_enc, He], list of each encoder layer's output before its time
        stacking)."""
        x = self._input(x)
        if x.dim() != 2 or x.shape[1] != self.cfg.feature_dim:
            raise ValueError(f"features must be [T, {self.cfg.feature_dim}], got {list(x.shape)}")
        f, outs, _ = self.encoder(self.frontend(x))
        return f, outs

    def predictor_init(self):
        """(g, state) after feeding the start symbol (row V) from zero state."""
        return self.predictor.step(self.cfg.vocab_size, self.predictor.zero_state())

    def predictor_step(self, label, state):
        """(g, state) after feeding label (0 <= label < V)."""
        if not 0 <= int(label) < self.cfg.vocab_size:
            raise ValueError(f"label {label} outside [0, {self.cfg.vocab_size})")
        return self.predictor.step(int(label), state)

    # joint(f_rows, g_rows) is the Joint module's forward: self.joint(f, g) -> logits [..., V + n + 1].

    # --- batched (training)
    def encode_batch(self, feats, feat_lens):
        """feats [B, T, F] (padded), feat_lens [B] -> (f [B, T_enc, He], enc_lens [B]). Each item's rows
        t < enc_lens[b] equal encode() of that item alone."""
        feats = self._input(feats)
        feat_lens = torch.as_tensor(feat_lens, dtype=torch.long, device=feats.device)
        x = self.frontend(feats, feat_lens)
        k = self.cfg.frame_stacking
        lens = feat_lens // k if self.cfg.stacking_tail == "drop" else -(-feat_lens // k)
        f, _, lens = self.encoder(x, lens)
        return f, lens

    def forward_logits(self, feats, feat_lens, labels):
        """feats [B, T, F], feat_lens [B], labels [B, U] (padded with any valid label) ->
        (logits [B, T_enc, U+1, V+n+1], enc_lens [B]). logits[b, t, u] is the joint of encoder frame t
        and the predictor output after the first u labels: what an RNN-T loss consumes."""
        f, enc_lens = self.encode_batch(feats, feat_lens)
        labels = torch.as_tensor(labels, dtype=torch.long, device=f.device)
        g = self.predictor(labels)
        return self.joint(f.unsqueeze(2), g.unsqueeze(1)), enc_lens

    def forward(self, feats, feat_lens, labels):
        return self.forward_logits(feats, feat_lens, labels)
