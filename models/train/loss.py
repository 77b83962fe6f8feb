"""Multi-blank RNN-T loss (Xu et al. 2023, "Multi-blank transducers for speech recognition"), PyTorch.

Joint outputs use the layout of FORMAT.md: [tokens 0..V-1 | big blanks | standard blank], big blank i
(duration d_i) at index V+n-1-i, the blank at V+n. With logit under-normalisation sigma, every
transition's log-probability is log_softmax(z) - sigma (as NeMo's multiblank loss), which favours
alignments with fewer steps, i.e. with big blanks.

Lattice: alpha[t, u] = log-probability of having emitted the first u labels and being at frame t.
  alpha[0, 0] = 0
  alpha[t, u] = logsumexp( alpha[t-1, u] + blank[t-1, u],
                           alpha[t-d_i, u] + big_i[t-d_i, u]    for every d_i <= t,
                           alpha[t, u-1] + label[t, u-1] )
  log P = logsumexp( alpha[T-1, U] + blank[T-1, U],  alpha[T-d_i, U] + big_i[T-d_i, U]  for d_i <= T )
(a big blank must end exactly at T, as in NeMo.) Vectorised over batch and u: for each t, the terms
that come from earlier frames form a[t, u], and the label recursion along u is solved in closed form,
alpha[t, u] = C[t, u] + logcumsumexp_k<=u (a[t, k] - C[t, k]) with C[t, u] = sum_{j<u} label[t, j].
Gradients: by default a hand-written backward (_Lattice): the beta recursion runs as the same loop
over frames in reversed-u coordinates (so the label recursion is again a logcumsumexp), and every
transition's gradient is its posterior occupancy exp(alpha + term + beta - log P), computed for all
(t, u) at once. RNNTD_TRAIN_LOSS=autograd differentiates through the alpha loop instead (the
original; tests/train/test_loss.py holds the two together).
"""
import os

import torch

from rnntd_ref.config import mb_output

NEG = -1.0e30


def lattice_terms(logits, labels, durations, sigma):
    """logits [B, T, U+1, K] -> (blank [B,T,U+1], bigs [n][B,T,U+1], lab [B,T,U]) log-probs - sigma."""
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    lp = torch.log_softmax(logits, dim=-1) - sigma
    K = lp.shape[-1]
    n = len(durations)
    blank = lp[..., K - 1]
    bigs = [lp[..., mb_output(K - n - 1, durations, i)] for i in range(n)]  # the one multi-blank rule
    U = labels.shape[1]
    idx = labels.long()[:, None, :, None].expand(lp.shape[0], lp.shape[1], U, 1)
    lab = lp[:, :, :U, :].gather(3, idx).squeeze(3)
    return blank, bigs, lab


USE_LATTICE_FN = os.environ.get("RNNTD_TRAIN_LOSS", "fn") != "autograd"


def _alpha(blank, bigs, lab, durations):
    """alpha [B, T, U+1] (module docstring); bigs indexable by i -> [B, T, U+1]. Rows are separate tensors
    stacked at the end, so autograd through it records no in-place writes."""
    B, T, U1 = blank.shape
    C = torch.cat([blank.new_zeros(B, T, 1), torch.cumsum(lab, dim=2)], dim=2)   # sum_{j<u} lab[t, j]
    alphas = []
    init = torch.full((B, U1), NEG, device=blank.device, dtype=blank.dtype)
    init[:, 0].zero_()           # not `= 0.0`: on CUDA that copies a CPU scalar, which a CUDA graph cannot capture
    for t in range(T):
        if t == 0:
            a = init
        else:
            terms = [alphas[t - 1] + blank[:, t - 1]]
            for i, d in enumerate(durations):
                if t >= d:
                    terms.append(alphas[t - d] + bigs[i][:, t - d])
            a = terms[0] if len(terms) == 1 else torch.logsumexp(torch.stack(terms), dim=0)
        Ct = C[:, t]
        alphas.append(Ct + torch.logcumsumexp(a - Ct, dim=1))
    return torch.stack(alphas, dim=1) if alphas else blank.new_zeros(B, 0, U1)


def _final(alpha, blank, bigs, Tl, Ul, durations):
    b = torch.arange(alpha.shape[0], device=alpha.device)
    final = [alpha[b, Tl - 1, Ul] + blank[b, Tl - 1, Ul]]
    for i, d in enumerate(durations):
        ok = Tl >= d
        td = torch.clamp(Tl - d, min=0)
        v = alpha[b, td, Ul] + bigs[i][b, td, Ul]
        final.append(torch.where(ok, v, torch.full_like(v, NEG)))
    return torch.logsumexp(torch.stack(final), dim=0)


class _Lattice(torch.autograd.Function):
    """(blank [B,T,U+1], bigs [n,B,T,U+1], lab [B,T,U], Tl [B], Ul [B]) -> log P [B]."""

    @staticmethod
    def forward(ctx, blank, bigs, lab, Tl, Ul, durations):
        alpha = _alpha(blank, bigs, lab, durations)
        ll = _final(alpha, blank, bigs, Tl, Ul, durations)
        ctx.save_for_backward(blank, bigs, lab, Tl, Ul, alpha, ll)
        ctx.durations = durations
        return ll

    @staticmethod
    def backward(ctx, g):
        blank, bigs, lab, Tl, Ul, alpha, ll = ctx.saved_tensors
        durations = ctx.durations
        B, T, U1 = blank.shape
        U = U1 - 1
        dmax = max(durations, default=1)
        dev, dt = blank.device, blank.dtype
        # beta[b, t, u]: log-probability of finishing from frame t with u labels emitted; the end state
        # is (Tl, Ul) (a blank or big blank must land exactly on Tl). Rows t >= Tl keep their initial
        # value, so nothing continues past the end. Kept as betaF[b, t, U - u]: in those coordinates the
        # label recursion runs forward along the row, like alpha's, and is a logcumsumexp.
        betaF = torch.full((B, T + dmax + 1, U1), NEG, device=dev, dtype=dt)
        bi = torch.arange(B, device=dev)
        betaF.index_put_((bi, Tl, U - Ul), betaF.new_zeros(()))    # not `= 0.0`: a CPU scalar copy, which a CUDA graph cannot capture
        blankF, bigsF, labF = blank.flip(2), bigs.flip(3), lab.flip(2)
        CF = torch.cat([blank.new_zeros(B, T, 1), torch.cumsum(labF, dim=2)], dim=2)
        live = torch.arange(T, device=dev)[None, :] < Tl[:, None]           # [B, T]
        for t in range(T - 1, -1, -1):
            terms = [blankF[:, t] + betaF[:, t + 1]]
            for i, d in enumerate(durations):
                terms.append(bigsF[i][:, t] + betaF[:, t + d])
            a = terms[0] if len(terms) == 1 else torch.logsumexp(torch.stack(terms), dim=0)
            CFt = CF[:, t]
            x = CFt + torch.logcumsumexp(a - CFt, dim=1)
            betaF[:, t] = torch.where(live[:, t, None], x, betaF[:, t])
        beta = betaF.flip(2)
        # Posterior occupancy of every transition, times the incoming gradient. Frames past an
        # utterance's end carry no probability (alpha there is padding arithmetic).
        base = torch.where(live[:, :, None], alpha, torch.full_like(alpha, NEG)) - ll[:, None, None]
        scale = torch.where(ll > NEG / 2, g, torch.zeros_like(g))[:, None, None]
        d_blank = torch.exp(base + blank + beta[:, 1:T + 1]) * scale
        d_bigs = torch.stack([torch.exp(base + bigs[i] + beta[:, d:T + d]) * scale
                              for i, d in enumerate(durations)]) if durations else torch.zeros_like(bigs)
        d_lab = torch.exp(base[:, :, :U] + lab + beta[:, :T, 1:]) * scale
        return d_blank, d_bigs, d_lab, None, None, None


def multiblank_rnnt_loglik(logits, labels, logit_lens, label_lens, durations=(), sigma=0.0):
    """Per-utterance log-likelihood [B] (under-normalised by sigma per step)."""
    blank, bigs, lab = lattice_terms(logits, labels, durations, sigma)
    if USE_LATTICE_FN:
        dev = blank.device
        big = torch.stack(bigs) if bigs else blank.new_zeros((0,) + tuple(blank.shape))
        return _Lattice.apply(blank, big, lab, logit_lens.long().to(dev), label_lens.long().to(dev),
                              tuple(int(d) for d in durations))
    # autograd through the alpha loop
    dev = blank.device
    alpha = _alpha(blank, bigs, lab, durations)
    return _final(alpha, blank, bigs, logit_lens.long().to(dev), label_lens.long().to(dev), durations)


def multiblank_rnnt_loss(logits, labels, logit_lens, label_lens, durations=(), sigma=0.0, reduction="mean",
                         weights=None):
    """-log P. reduction: none | sum | mean (mean over utterances of loss / label count, as NeMo's 'mean')
    | mean_batch (plain mean over utterances). weights [B] (with mean / mean_batch): a weighted mean, for
    batches of a fixed shape filled with weight-0 dummy rows (graph_step.py); their loss must be finite."""
    ll = multiblank_rnnt_loglik(logits, labels, logit_lens, label_lens, durations, sigma)
    loss = -ll
    if weights is not None and reduction in ("mean", "mean_batch"):
        w = weights.to(loss.dtype)
        per = loss / label_lens.to(loss.device).clamp(min=1) if reduction == "mean" else loss
        return (per * w).sum() / w.sum().clamp(min=1e-12)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean_batch":
        return loss.mean()
    if reduction == "mean":
        return (loss / label_lens.to(loss.device).clamp(min=1)).mean()
    raise ValueError("reduction %r" % reduction)


def brute_force_loglik(logits, labels, T, U, durations=(), sigma=0.0):
    """log P of ONE utterance by enumerating every alignment (tests only: exponential)."""
    lp = torch.log_softmax(logits.double(), dim=-1) - sigma
    K = lp.shape[-1]
    steps = [(1, K - 1)] + [(d, K - 2 - i) for i, d in enumerate(durations)]
    total = []

    def walk(t, u, acc):
        if t == T:
            if u == U:
                total.append(acc)
            return
        if t > T:
            return
        if u < U:
            walk(t, u + 1, acc + lp[t, u, int(labels[u])])
        for d, k in steps:                                    # blanks: to frame t + d, never past T
            if t + d <= T:
                walk(t + d, u, acc + lp[t, u, k])
    walk(0, 0, lp.new_zeros(()))
    return torch.logsumexp(torch.stack(total), dim=0)
