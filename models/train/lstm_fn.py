"""A whole hard-activation LSTM layer as one autograd Function, with a hand-written backward.

Why: training ran at ~2 steps/s on the H100 because every time step of every LSTM was a dozen small
kernels, each recorded by autograd and replayed in reverse by it (about 25 launches per step forward and
backward together, plus autograd's bookkeeping per op). Here the forward is 7 kernels per step with
autograd off, and the backward is 5 per step: everything that does not depend on the gradient flowing
back through time (the gates' values and the hard activations' 0-or-slope masks) is computed for all
steps at once before the reverse loop, and the recurrent weight's gradient is one GEMM over all steps.

Math (gate order i, f, g, o as FORMAT.md; zero initial state):
  a_t = xw_t + h_{t-1} W_hh^T          (xw_t: input projection with both biases)
  i, f, o = hardsigmoid(a_i, a_f, a_o)  g = hardtanh(a_g)
  c_t = f c_{t-1} + i g                 h_t = o hardtanh(c_t)
Backward, with dh_t = dY_t + dA_{t+1} W_hh and dc carried from t+1:
  dc_t  = dh_t o hardtanh'(c_t) + dc_{t+1}
  dA_t  = [dc_t g si', dc_t c_{t-1} sf', dc_t i g', dh_t hardtanh(c_t) so']
  dc carried to t-1 = dc_t f
hardsigmoid' = 1/6 on (-3, 3), hardtanh' = 1 on (-1, 1), 0 elsewhere (PyTorch's conventions at the
kinks). tests/train/test_lstm_fn.py holds it to autograd through the plain loop, in float64.
"""
import torch
import torch.nn.functional as F


class HardLSTMSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xw, whh):
        """xw [B, T, 4H] (input projection + biases), whh [4H, H] -> y [B, T, H]."""
        B, T, G = xw.shape
        H = G // 4
        A = xw.new_empty(T, B, G)          # pre-activations, kept for the backward
        C = xw.new_empty(T + 1, B, H)      # C[0] = initial cell (0), C[t + 1] = c_t
        Y = xw.new_empty(T + 1, B, H)      # Y[0] = initial h (0), Y[t + 1] = h_t
        C[0].zero_()
        Y[0].zero_()
        whh_t = whh.t()
        for t in range(T):
            a = torch.addmm(xw[:, t], Y[t], whh_t, out=A[t])
            s = F.hardsigmoid(a)
            g = F.hardtanh(a[:, 2 * H:3 * H])
            c = torch.mul(s[:, H:2 * H], C[t], out=C[t + 1])
            c.addcmul_(s[:, :H], g)
            torch.mul(s[:, 3 * H:], F.hardtanh(c), out=Y[t + 1])
        ctx.save_for_backward(A, C, Y, whh)
        return Y[1:].transpose(0, 1).contiguous()

    @staticmethod
    def backward(ctx, dy):
        A, C, Y, whh = ctx.saved_tensors
        T, B, G = A.shape
        H = G // 4
        dxw = dwhh = None
        if T == 0:
            return A.new_zeros(B, 0, G), torch.zeros_like(whh)
        dy = dy.transpose(0, 1)            # [T, B, H] view
        # Everything that does not depend on the gradient through time, for all steps at once.
        ai, af, ag, ao = A.split(H, dim=2)
        s_if = F.hardsigmoid(A[:, :, :2 * H])
        si, sf = s_if[:, :, :H], s_if[:, :, H:]
        so = F.hardsigmoid(ao)
        g = F.hardtanh(ag)
        c, c_prev = C[1:], C[:-1]
        tc = F.hardtanh(c)
        sig_d = lambda x: ((x > -3.0) & (x < 3.0)).to(x.dtype) * (1.0 / 6.0)  # noqa: E731
        tanh_d = lambda x: ((x > -1.0) & (x < 1.0)).to(x.dtype)               # noqa: E731
        p_dc = so * tanh_d(c)                                  # dh -> dc_t
        q_do = tc * sig_d(ao)                                  # dh -> dA_o
        k_ifg = torch.cat([g * sig_d(ai), c_prev * sig_d(af), si * tanh_d(ag)], dim=2)   # dc -> dA_i,f,g
        del s_if, tc
        dA = torch.empty_like(A)
        dc = torch.zeros_like(C[0])
        dA3 = dA[:, :, :3 * H]
        dh = dy[T - 1]
        for t in range(T - 1, -1, -1):
            if t < T - 1:
                dh = torch.addmm(dy[t], dA[t + 1], whh)
            dct = torch.addcmul(dc, dh, p_dc[t])
            torch.mul(dh, q_do[t], out=dA[t, :, 3 * H:])
            torch.mul(dct.unsqueeze(1), k_ifg[t].view(B, 3, H), out=dA3[t].view(B, 3, H))
            dc = dct.mul_(sf[t])
        if ctx.needs_input_grad[1]:
            dwhh = dA.reshape(T * B, G).t().mm(Y[:-1].reshape(T * B, H))   # h_{t-1} of every step
        if ctx.needs_input_grad[0]:
            dxw = dA.transpose(0, 1)
        return dxw, dwhh


def hard_lstm_seq(xw, whh):
    return HardLSTMSeq.apply(xw, whh)
