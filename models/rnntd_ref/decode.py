"""Greedy multi-blank decoding, exactly FORMAT.md stage 6, one utterance at a time, written to be read.

The decoder only uses model.cfg (vocab_size, big_blank_durations, max_symbols), model.encode,
model.predictor_init, model.predictor_step and model.joint, so tests can hand it a fake model whose
joint outputs they script.
"""
import re

import torch

from .config import mb_advance


class NumericError(ArithmeticError):
    """A joint output that the decoder takes an argmax of is not finite (RNNT_ERR_NUMERIC)."""


def greedy_decode(model, feats, on_step=None):
    """feats [T, F] raw features -> (tokens, frames): the emitted labels and the encoder frame of each.

    on_step(t, u, logits, k), when given, is called at every joint evaluation with the frame t, the
    number of labels emitted so far u, the logits and the chosen output k (for the golden writer)."""
    with torch.no_grad():
        f, _ = model.encode(feats)
        return greedy_decode_encoded(model, f, on_step)


def greedy_decode_encoded(model, f, on_step=None):
    """The decoding loop over encoder output f [T_enc, He]."""
    cfg = model.cfg
    V = cfg.vocab_size
    T_enc = f.shape[0]
    tokens, frames = [], []
    with torch.no_grad():
        g, state = model.predictor_init()
        t = 0
        labels_here = 0
        while t < T_enc:
            z = model.joint(f[t], g)
            if not bool(torch.isfinite(z).all()):
                raise NumericError(f"non-finite joint output at frame {t}")
            k = int(torch.nonzero(z == z.max())[0, 0])  # ties go to the lowest index
            if on_step is not None:
                on_step(t, len(tokens), z, k)
            if k < V:  # a label: keep the frame unless max_symbols labels were emitted on it
                tokens.append(k)
                frames.append(t)
                g, state = model.predictor_step(k, state)
                labels_here += 1
                if labels_here == cfg.max_symbols:
                    t += 1
                    labels_here = 0
            else:  # the blank: one frame forward; a big blank: its duration (and may jump past the end)
                t += mb_advance(k, V, cfg.big_blank_durations)
                labels_here = 0
    return tokens, frames


def detokenize(tokens, token_list):
    """Text of a token sequence (FORMAT.md, tokens.txt): concatenate, '▁' -> space, strip, fold spaces."""
    text = "".join(token_list[k] for k in tokens).replace("\u2581", " ")
    return re.sub(" +", " ", text).strip(" ")
