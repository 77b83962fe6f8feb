"""The training-side LSTM transducer: the math of FORMAT.md, batched, with fewer kernels per step.

Parameter and buffer names are the tensor names of weights.safetensors (as rnntd_ref.model.RNNTModel),
so `state_dict()` exports as it is (rnntd_ref.io.export_state_dict). tests/train/test_model.py holds this
module to the reference: same weights, same encoder output and logits, same greedy decoding.

Differences from the reference, all numerically harmless: the hard sigmoid is computed on the whole
gate vector at once as clamp(a * (1/6) + 0.5, 0, 1) (the reference divides by 6), and the two biases are
added to the input projection of all steps at once. Hard layers run through lstm_fn.HardLSTMSeq
(F.hardsigmoid, i.e. min(max(x + 3, 0), 6) / 6, and a hand-written backward).
"""
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

from rnntd_ref.config import ModelConfig, mb_advance

from .lstm_fn import hard_lstm_seq

# Hard LSTM layers run as one autograd Function with a hand-written backward (lstm_fn.py, several
# times fewer kernels per step); RNNTD_TRAIN_LSTM=loop gives the plain autograd loop below instead.
USE_SEQ_FN = os.environ.get("RNNTD_TRAIN_LSTM", "fn") != "loop"


def stack_frames(x, k):
    """[B, T, D] -> [B, ceil(T/k), k*D], zero padded (FORMAT.md stage 2)."""
    if k == 1:
        return x
    B, T, D = x.shape
    T1 = -(-T // k)
    if T1 * k != T:
        x = F.pad(x, (0, 0, 0, T1 * k - T))
    return x.reshape(B, T1, k * D)


def time_mask(lengths, T, like):
    return (torch.arange(T, device=like.device)[None, :] < lengths[:, None]).to(like.dtype)[..., None]


class HardLSTM(nn.Module):
    def __init__(self, input_size, hidden_size, activation="hard"):
        super().__init__()
        H = hidden_size
        self.hidden_size, self.activation = H, activation
        self.weight_ih = nn.Parameter(torch.empty(4 * H, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * H, H))
        self.bias_ih = nn.Parameter(torch.empty(4 * H))
        self.bias_hh = nn.Parameter(torch.empty(4 * H))
        bound = 1.0 / math.sqrt(H)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)
        with torch.no_grad():                      # forget gate open at the start: longer memory
            self.bias_ih[H:2 * H] += 1.0

    def cell(self, a, c):
        H = self.hidden_size
        if self.activation == "hard":
            s = torch.clamp(a * (1.0 / 6.0) + 0.5, 0.0, 1.0)
            g = torch.clamp(a[:, 2 * H:3 * H], -1.0, 1.0)
            c = torch.addcmul(s[:, H:2 * H] * c, s[:, :H], g)
            h = s[:, 3 * H:] * torch.clamp(c, -1.0, 1.0)
        else:
            s = torch.sigmoid(a)
            g = torch.tanh(a[:, 2 * H:3 * H])
            c = torch.addcmul(s[:, H:2 * H] * c, s[:, :H], g)
            h = s[:, 3 * H:] * torch.tanh(c)
        return h, c

    def forward(self, x):
        """x [B, T, I] -> [B, T, H] from zero state."""
        B, T, _ = x.shape
        xw = F.linear(x, self.weight_ih, self.bias_ih + self.bias_hh)
        if self.activation == "hard" and USE_SEQ_FN:
            return hard_lstm_seq(xw, self.weight_hh)
        h = x.new_zeros(B, self.hidden_size)
        c = x.new_zeros(B, self.hidden_size)
        whh = self.weight_hh.t()
        ys = []
        for t in range(T):
            h, c = self.cell(torch.addmm(xw[:, t], h, whh), c)
            ys.append(h)
        if not ys:
            return x.new_zeros(B, 0, self.hidden_size)
        return torch.stack(ys, dim=1)

    def step(self, x, state):
        h, c = state
        a = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)
        return self.cell(a, c)


class _Frontend(nn.Module):
    def __init__(self, F_):
        super().__init__()
        self.register_buffer("mean", torch.zeros(F_))
        self.register_buffer("std", torch.ones(F_))


class _Encoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.lstm = nn.ModuleList(HardLSTM(layer.input, layer.hidden, cfg.lstm_activation)
                                  for layer in cfg.encoder.layers)
        self.stacks = [layer.time_stack for layer in cfg.encoder.layers]


class _Predictor(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embedding = nn.Parameter(torch.randn(cfg.vocab_size + 1, cfg.predictor.embedding) * 0.5)
        self.lstm = nn.ModuleList(HardLSTM(layer.input, layer.hidden, cfg.lstm_activation)
                                  for layer in cfg.predictor.layers)


class _Joint(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.enc = nn.Linear(cfg.encoder_hidden, cfg.joint.dim)
        self.pred = nn.Linear(cfg.predictor_hidden, cfg.joint.dim)
        self.out = nn.Linear(cfg.joint.dim, cfg.n_out)
        self.act = torch.relu if cfg.joint.activation == "relu" else torch.tanh


class TrainModel(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.frontend = _Frontend(cfg.feature_dim)
        self.encoder = _Encoder(cfg)
        self.predictor = _Predictor(cfg)
        self.joint = _Joint(cfg)

    # ---- encoder
    def encode(self, feats, lens):
        """feats [B, T, F] raw log-mel (padded), lens [B] -> (f [B, T_enc, He], enc_lens [B])."""
        x = (feats - self.frontend.mean) / self.frontend.std
        x = x * time_mask(lens, x.shape[1], x)
        k = self.cfg.frame_stacking
        x = stack_frames(x, k)
        lens = -(-lens // k)
        for layer, s in zip(self.encoder.lstm, self.encoder.stacks):
            x = layer(x)
            if s > 1:
                x = stack_frames(x * time_mask(lens, x.shape[1], x), s)
                lens = -(-lens // s)
        return x, lens

    # ---- predictor
    def predict(self, labels):
        """labels [B, U] -> g [B, U+1, Hp] (row 0 after the start symbol)."""
        start = labels.new_full((labels.shape[0], 1), self.cfg.vocab_size)
        x = self.predictor.embedding[torch.cat([start, labels], dim=1)]
        for layer in self.predictor.lstm:
            x = layer(x)
        return x

    def pred_step(self, labels, state):
        x = self.predictor.embedding[labels]
        new = []
        for layer, st in zip(self.predictor.lstm, state):
            h, c = layer.step(x, st)
            new.append((h, c))
            x = h
        return x, new

    def pred_zero(self, B, like):
        return [(like.new_zeros(B, l.hidden_size), like.new_zeros(B, l.hidden_size)) for l in self.predictor.lstm]

    # ---- joint
    def joint_logits(self, f, g):
        """f [B, T, He], g [B, U+1, Hp] -> [B, T, U+1, K]."""
        h = self.joint.act(self.joint.enc(f)[:, :, None, :] + self.joint.pred(g)[:, None, :, :])
        return self.joint.out(h)

    def forward(self, feats, lens, labels):
        f, enc_lens = self.encode(feats, lens)
        g = self.predict(labels)
        return self.joint_logits(f, g), enc_lens

    # ---- batched greedy decoding (FORMAT.md stage 6 for each item independently)
    @torch.no_grad()
    def greedy(self, feats, lens):
        """-> (list of token lists, list of frame lists, stats dict with frames stepped by each output)."""
        cfg = self.cfg
        V, durs = cfg.vocab_size, list(cfg.big_blank_durations)
        f, enc_lens = self.encode(feats, lens)
        B = f.shape[0]
        dev = f.device
        # frames each joint output moves the decoder on (rnntd_ref's one multi-blank rule)
        step = torch.tensor([mb_advance(k, V, durs) for k in range(cfg.n_out)], dtype=torch.long, device=dev)
        t = torch.zeros(B, dtype=torch.long, device=dev)
        here = torch.zeros(B, dtype=torch.long, device=dev)
        state = self.pred_zero(B, f)
        g, state = self.pred_step(torch.full((B,), V, dtype=torch.long, device=dev), state)
        fe = self.joint.enc(f)
        log = []
        skipped = torch.zeros(B, dtype=torch.long, device=dev)   # frames jumped over by big blanks
        b_idx = torch.arange(B, device=dev)
        while True:
            active = t < enc_lens
            if not bool(active.any()):
                break
            tt = torch.clamp(t, max=f.shape[1] - 1)
            z = self.joint.out(self.joint.act(fe[b_idx, tt] + self.joint.pred(g)))
            k = z.argmax(dim=1)
            emit = active & (k < V)
            adv = torch.where(active & ~emit, step[k], torch.zeros_like(k))
            skipped += torch.where(active & (adv > 1), torch.minimum(adv, enc_lens - t) - 1, torch.zeros_like(adv))
            here = torch.where(emit, here + 1, torch.zeros_like(here))
            forced = emit & (here >= cfg.max_symbols)
            adv = torch.where(forced, torch.ones_like(adv), adv)
            here = torch.where(forced, torch.zeros_like(here), here)
            if bool(emit.any()):
                ke = torch.where(emit, k, torch.zeros_like(k))
                g2, st2 = self.pred_step(ke, state)
                m = emit[:, None]
                g = torch.where(m, g2, g)
                state = [(torch.where(m, h2, h1), torch.where(m, c2, c1)) for (h2, c2), (h1, c1) in zip(st2, state)]
                log.append((emit, k, t))
            t = t + adv
        toks = [[] for _ in range(B)]
        frames = [[] for _ in range(B)]
        if log:
            em = torch.stack([e for e, _, _ in log]).cpu()
            ks = torch.stack([k for _, k, _ in log]).cpu()
            ts = torch.stack([t for _, _, t in log]).cpu()
            for i, b in torch.nonzero(em).tolist():
                toks[b].append(int(ks[i, b]))
                frames[b].append(int(ts[i, b]))
        return toks, frames, {"enc_frames": int(enc_lens.sum()), "skipped": int(skipped.sum())}
