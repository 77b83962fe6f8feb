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
Gradients come from autograd through this loop (T steps of a handful of [B, U+1] kernels).
"""
import torch

NEG = -1.0e30


def lattice_terms(logits, labels, durations, sigma):
    """logits [B, T, U+1, K] -> (blank [B,T,U+1], bigs [n][B,T,U+1], lab [B,T,U]) log-probs - sigma."""
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    lp = torch.log_softmax(logits, dim=-1) - sigma
    K = lp.shape[-1]
    n = len(durations)
    blank = lp[..., K - 1]
    bigs = [lp[..., K - 2 - i] for i in range(n)]               # big blank i at index V + n - 1 - i
    U = labels.shape[1]
    idx = labels.long()[:, None, :, None].expand(lp.shape[0], lp.shape[1], U, 1)
    lab = lp[:, :, :U, :].gather(3, idx).squeeze(3)
    return blank, bigs, lab


def multiblank_rnnt_loglik(logits, labels, logit_lens, label_lens, durations=(), sigma=0.0):
    """Per-utterance log-likelihood [B] (under-normalised by sigma per step)."""
    blank, bigs, lab = lattice_terms(logits, labels, durations, sigma)
    B, T, U1 = blank.shape
    dev = blank.device
    # C[t, u] = sum_{j<u} lab[t, j]
    C = torch.cat([blank.new_zeros(B, T, 1), torch.cumsum(lab, dim=2)], dim=2)
    alphas = []
    init = torch.full((B, U1), NEG, device=dev, dtype=blank.dtype)
    init[:, 0] = 0.0
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
    alpha = torch.stack(alphas, dim=1)                          # [B, T, U+1]
    b = torch.arange(B, device=dev)
    Tl, Ul = logit_lens.long().to(dev), label_lens.long().to(dev)
    final = [alpha[b, Tl - 1, Ul] + blank[b, Tl - 1, Ul]]
    for i, d in enumerate(durations):
        ok = Tl >= d
        td = torch.clamp(Tl - d, min=0)
        v = alpha[b, td, Ul] + bigs[i][b, td, Ul]
        final.append(torch.where(ok, v, torch.full_like(v, NEG)))
    return torch.logsumexp(torch.stack(final), dim=0)


def multiblank_rnnt_loss(logits, labels, logit_lens, label_lens, durations=(), sigma=0.0, reduction="mean"):
    """-log P. reduction: none | sum | mean (mean over utterances of loss / label count, as NeMo's 'mean')
    | mean_batch (plain mean over utterances)."""
    ll = multiblank_rnnt_loglik(logits, labels, logit_lens, label_lens, durations, sigma)
    loss = -ll
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
